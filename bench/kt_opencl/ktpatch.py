"""The patches tune_kt.py applies to Kernel Tuner 1.5 (see tune_kt.py's doc for why each exists).

install(kdef, sizes, verify_log, on_eval, failures_as_configs) patches, process-wide:
  1. OpenCLFunctions.compile: each compiled kernel is wrapped so that its `__local` pointer
     arguments become pyopencl.LocalMemory of kfoundry's size for that configuration;
  2. DeviceInterface.run_kernel: INVALID_WORK_GROUP_SIZE at verification is skipped like
     Kernel Tuner skips it at benchmarking (the configuration ends as RuntimeFailedConfig);
  3. (failures_as_configs) DeviceInterface.compile_and_benchmark: an exception (a verification
     failure, an unrecognised compile or launch error) makes the configuration a failed one
     (RuntimeFailedConfig) instead of ending the tune; the reason is kept for the trace;
  4. (on_eval) runners.sequential.store_cache: on_eval(params, why_failed) for every configuration
     freshly evaluated, when Kernel Tuner stores it in its cache.
"""

import pyopencl as cl
from kernel_tuner import core, util
from kernel_tuner.backends import opencl as kt_opencl
from kernel_tuner.runners import sequential as kt_sequential

import kernels as K

_ORIG = {
    "compile": kt_opencl.OpenCLFunctions.compile,
    "run_kernel": core.DeviceInterface.run_kernel,
    "compile_and_benchmark": core.DeviceInterface.compile_and_benchmark,
    "store_cache": kt_sequential.store_cache,
}


class LocalArgKernel:
    """A compiled kernel whose `__local` arguments get the configuration's size at each launch."""

    def __init__(self, func, params, locals_):
        self.func, self.params, self.locals = func, dict(params), locals_

    def __call__(self, queue, global_size, local_size, *args):
        args = list(args)
        for i, nbytes in self.locals.items():
            args[i] = cl.LocalMemory(int(nbytes(self.params)))
        return self.func(queue, global_size, local_size, *args)


def install(kdef, sizes, verify_log=None, on_eval=None, failures_as_configs=True):
    uninstall()
    locals_ = K.local_arg_bytes(kdef, sizes)
    verify_log = verify_log if verify_log is not None else []
    failure = {"why": None}

    def compile_(self, kernel_instance):
        func = _ORIG["compile"](self, kernel_instance)
        return LocalArgKernel(func, kernel_instance.params, locals_) if locals_ and func else func

    kt_opencl.OpenCLFunctions.compile = compile_

    def run_kernel(self, func, gpu_args, instance):
        try:
            return _ORIG["run_kernel"](self, func, gpu_args, instance)
        except Exception as e:
            if "INVALID_WORK_GROUP_SIZE" in str(e):
                return False
            raise

    core.DeviceInterface.run_kernel = run_kernel

    if failures_as_configs:

        def compile_and_benchmark(self, kernel_source, gpu_args, params, kernel_options, to):
            failure["why"] = None
            del verify_log[:]
            try:
                return _ORIG["compile_and_benchmark"](self, kernel_source, gpu_args, params, kernel_options, to)
            except Exception as e:  # noqa: BLE001
                text = str(e).strip()
                msg = text.splitlines()[0] if text else type(e).__name__
                if "verification failed" in msg:
                    failure["why"] = "wrong: " + ("; ".join(verify_log) or msg)
                else:
                    failure["why"] = f"{type(e).__name__}: {msg}"[:500]
                try:
                    self.dev.synchronize()
                except Exception:  # noqa: BLE001
                    pass
                return {"__error__": util.RuntimeFailedConfig(), "compile_time": 0, "verification_time": 0, "benchmark_time": 0}

        core.DeviceInterface.compile_and_benchmark = compile_and_benchmark

    if on_eval is not None:

        def store_cache(key, params, cachefile, cache):
            fresh = isinstance(cache, dict) and key not in cache
            _ORIG["store_cache"](key, params, cachefile, cache)
            if fresh:
                on_eval(params, failure["why"])
            failure["why"] = None

        kt_sequential.store_cache = store_cache
    return failure


def uninstall():
    kt_opencl.OpenCLFunctions.compile = _ORIG["compile"]
    core.DeviceInterface.run_kernel = _ORIG["run_kernel"]
    core.DeviceInterface.compile_and_benchmark = _ORIG["compile_and_benchmark"]
    kt_sequential.store_cache = _ORIG["store_cache"]
