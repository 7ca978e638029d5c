"""Issue 29: the work-group limit NVIDIA's OpenCL reports for kernels built from the bundle
(`CL_KERNEL_WORK_GROUP_SIZE`), at the reference and at larger work-groups. Usage on the device
machine: python3 bench/h200/wglimit.py (after .device/opencl-setup.sh; pyopencl from .whl;
.device/bundle.json from `cargo kfoundry bundle --workspace -o .device/bundle.json`)."""
import json
import warnings

import pyopencl as cl
warnings.filterwarnings("ignore")
b = json.load(open(".device/bundle.json"))
plat = [p for p in cl.get_platforms() if "NVIDIA" in p.name][0]
dev = plat.get_devices()[0]
ctx = cl.Context([dev])
print(dev.name, "max work-group", dev.max_work_group_size)
want = {"kfoundry-examples::Softmax": [{}, {"WG": 512}, {"WG": 1024}], "kfoundry-examples::LayerNormApply": [{}, {"WG": 512}],
        "kfoundry-examples::SumDim1": [{}, {"TX": 512}], "kfoundry-examples::Saxpy": [{}], "kfoundry-examples::RowSum": [{}],
        "kfoundry-examples::ConvGroupNorm": [{}], "kb-linear-gelu-softmax::K01Softmax": [{}, {"WG": 1024}], "kfoundry-examples::Sgemm": [{}]}
for k in b["kernels"]:
    s = k["spec"]
    if s["id"] not in want:
        continue
    for extra in want[s["id"]]:
        p = dict(s["reference"], **extra)
        opts = (s.get("options") or "") + " " + " ".join(f"-D {a}={v}" for a, v in p.items())
        try:
            prg = cl.Program(ctx, s["source"]).build(options=opts)
            kern = prg.all_kernels()[0]
            wg = kern.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, dev)
            print(s["id"], extra or "reference", "CL_KERNEL_WORK_GROUP_SIZE", wg, flush=True)
        except Exception as e:
            print(s["id"], extra, "FAILED", str(e)[:200])
