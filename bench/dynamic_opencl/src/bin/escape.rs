//! The 2-D escape kernel of hostile.rs (BAD=2 writes y[-1]) run as the evaluator runs it: x and
//! y sub-buffers 64 KiB into their parents. Prints whether the write before y shows in y's
//! parent, for a few launch shapes and build options.
use cl3::{command_queue, context, device, kernel, memory, platform, program};
use std::ffi::{c_void, CString};

const SRC: &str = r#"
__kernel void scale2(const int rows, const int cols, __global const float* x, __global float* y) {
    int c = get_global_id(0), r = get_global_id(1);
#if BAD == 2
    if (c < cols) { y[r * cols + c] = 3.0f * x[r * cols + c]; if (r == 0 && c == 0) y[-1] = 1.0f; }
#elif BAD == 4
    if (c < cols) { y[r * cols + c] = 3.0f * x[r * cols + c]; }
    if (r == 0 && c == 0) y[-1] = 1.0f;
#elif BAD == 5
    if (r == 0 && c == 0) { __global float* p = y - 1; *p = 1.0f; }
#elif BAD == 6
    if (r == 0 && c == 0) y[-1] = 1.0f;
#endif
}
__kernel void scrub(__global uint* sink, const uint never) {
    __local uint tile[12288];
    for (int i = get_local_id(0); i < 12288; i += get_local_size(0)) tile[i] = 0xDEADBEEFu;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (never == 12345u) sink[0] = tile[get_local_id(0)];
}
__kernel void poison(__global uint* out, const ulong n) {
    for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) out[i] = 0xFFFFFFFFu;
}
"#;

fn main() {
    let platforms = platform::get_platform_ids().unwrap();
    let all: Vec<_> = platforms.iter().flat_map(|p| device::get_device_ids(*p, device::CL_DEVICE_TYPE_ALL).unwrap_or_default()).collect();
    let is_gpu = |d: &_| device::get_device_info(*d, device::CL_DEVICE_TYPE).map(|t| u64::from(t) & device::CL_DEVICE_TYPE_GPU != 0).unwrap_or(false);
    let d = all.iter().copied().find(is_gpu).unwrap_or(all[0]);
    println!("device: {}", String::from(device::get_device_info(d, device::CL_DEVICE_NAME).unwrap()));
    let ctx = context::create_context(&[d], std::ptr::null(), None, std::ptr::null_mut()).unwrap();
    #[allow(deprecated)]
    let q0 = unsafe { command_queue::create_command_queue(ctx, d, 0).unwrap() };
    #[allow(deprecated)]
    let qp = unsafe { command_queue::create_command_queue(ctx, d, command_queue::CL_QUEUE_PROFILING_ENABLE).unwrap() };
    let (rows, cols) = (100i32, 100i32);
    let n = (rows * cols) as usize * 4;
    let front = 65536usize;
    let back = 65536usize;
    const VERBATIM: &str = include_str!("escape_source.cl");
    for (bad, opts, mode, profiling, scrub) in [(2, "", 1, false, false), (2, "verbatim", 1, false, false), (0, "verbatim", 1, false, false)] {
        let q = if profiling { qp } else { q0 };
        {
            let text = if opts == "verbatim" { format!("{VERBATIM}{}", &SRC[SRC.find("__kernel void scrub").unwrap()..]) } else { SRC.to_string() };
            let prog = program::create_program_with_source(ctx, &[text.as_str()]).unwrap();
            let o = CString::new(format!("-D BAD={bad}")).unwrap();
            program::build_program(prog, &[d], &o, None, std::ptr::null_mut()).unwrap();
            let k = kernel::create_kernel(prog, &CString::new("scale2").unwrap()).unwrap();
            let pk = kernel::create_kernel(prog, &CString::new("poison").unwrap()).unwrap();
            let mk = || {
                let total = front + n + back;
                let parent = unsafe { memory::create_buffer(ctx, memory::CL_MEM_READ_WRITE, total, std::ptr::null_mut()).unwrap() };
                let pattern = vec![0xABu8; total];
                if mode >= 1 {
                    // as the evaluator does: a kernel poisons the whole parent, then the front guard is written from the host
                    let words = (total / 4) as u64;
                    unsafe {
                        kernel::set_kernel_arg(pk, 0, std::mem::size_of::<*mut c_void>(), &parent as *const _ as *const c_void).unwrap();
                        kernel::set_kernel_arg(pk, 1, 8, &words as *const _ as *const c_void).unwrap();
                        let g = [4096usize];
                        command_queue::enqueue_nd_range_kernel(q, pk, 1, std::ptr::null(), g.as_ptr(), std::ptr::null(), 0, std::ptr::null()).unwrap();
                    }
                    if mode == 1 {
                        unsafe { command_queue::enqueue_write_buffer(q, parent, 1, 0, front, pattern.as_ptr() as *const c_void, 0, std::ptr::null()).unwrap() };
                    }
                } else {
                    unsafe { command_queue::enqueue_write_buffer(q, parent, 1, 0, total, pattern.as_ptr() as *const c_void, 0, std::ptr::null()).unwrap() };
                }
                let region = memory::cl_buffer_region { origin: front, size: n + back };
                let sub = unsafe {
                    memory::create_sub_buffer(parent, memory::CL_MEM_READ_WRITE, memory::CL_BUFFER_CREATE_TYPE_REGION, &region as *const _ as *const c_void)
                        .unwrap()
                };
                (parent, sub)
            };
            let (_xp, xs) = mk();
            let (yp, ys) = mk();
            unsafe {
                kernel::set_kernel_arg(k, 0, 4, &rows as *const _ as *const c_void).unwrap();
                kernel::set_kernel_arg(k, 1, 4, &cols as *const _ as *const c_void).unwrap();
                kernel::set_kernel_arg(k, 2, std::mem::size_of::<*mut c_void>(), &xs as *const _ as *const c_void).unwrap();
                kernel::set_kernel_arg(k, 3, std::mem::size_of::<*mut c_void>(), &ys as *const _ as *const c_void).unwrap();
            }
            if scrub {
                let sk = kernel::create_kernel(prog, &CString::new("scrub").unwrap()).unwrap();
                let sink = unsafe { memory::create_buffer(ctx, memory::CL_MEM_READ_WRITE, 64, std::ptr::null_mut()).unwrap() };
                let never = 0u32;
                unsafe {
                    kernel::set_kernel_arg(sk, 0, std::mem::size_of::<*mut c_void>(), &sink as *const _ as *const c_void).unwrap();
                    kernel::set_kernel_arg(sk, 1, 4, &never as *const _ as *const c_void).unwrap();
                    let g = [132usize * 256];
                    let l = [256usize];
                    command_queue::enqueue_nd_range_kernel(q, sk, 1, std::ptr::null(), g.as_ptr(), l.as_ptr(), 0, std::ptr::null()).unwrap();
                }
            }
            let g = [128usize, 100];
            let l = [64usize, 1];
            unsafe { command_queue::enqueue_nd_range_kernel(q, k, 2, std::ptr::null(), g.as_ptr(), l.as_ptr(), 0, std::ptr::null()).unwrap() };
            command_queue::finish(q).unwrap();
            let mut got = vec![0u8; front];
            unsafe { command_queue::enqueue_read_buffer(q, yp, 1, 0, front, got.as_mut_ptr() as *mut c_void, 0, std::ptr::null()).unwrap() };
            let expect = if mode == 2 { 0xFF } else { 0xAB };
            let changed: Vec<usize> = got.iter().enumerate().filter(|(_, b)| **b != expect).map(|(i, _)| i).collect();
            println!("BAD={bad} {opts:>16} mode {mode} profiling {profiling} scrub {scrub}: front guard bytes changed: {} {:?}", changed.len(), changed.iter().take(4).collect::<Vec<_>>());
        }
    }
}
