//! How much does loading OpenCL at run time (cl3's `dynamic` feature) cost against linking it?
//! Prints: whether OpenCL could be reached, then ns per clGetDeviceInfo and µs per
//! enqueue+finish of an empty kernel, medians over 7 rounds.
use cl3::{command_queue, context, device, kernel, platform, program};
use std::ffi::CString;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 { v.sort_by(|a, b| a.partial_cmp(b).unwrap()); v[v.len() / 2] }

fn main() {
    let platforms = match platform::get_platform_ids() {
        Ok(p) => p,
        Err(e) => { println!("no OpenCL: error {e} (the program started and reports it)"); return; }
    };
    // The first GPU of any platform, else the first device.
    let all: Vec<_> = platforms.iter().flat_map(|p| device::get_device_ids(*p, device::CL_DEVICE_TYPE_ALL).unwrap_or_default()).collect();
    let is_gpu = |d: &_| device::get_device_info(*d, device::CL_DEVICE_TYPE).map(|t| u64::from(t) & device::CL_DEVICE_TYPE_GPU != 0).unwrap_or(false);
    let d = all.iter().copied().find(is_gpu).unwrap_or(all[0]);
    let mut info = Vec::new();
    for _ in 0..7 {
        let n = 200_000;
        let t = Instant::now();
        for _ in 0..n { std::hint::black_box(device::get_device_info(d, device::CL_DEVICE_MAX_COMPUTE_UNITS).unwrap()); }
        info.push(t.elapsed().as_nanos() as f64 / n as f64);
    }
    let ctx = context::create_context(&[d], std::ptr::null(), None, std::ptr::null_mut()).unwrap();
    #[allow(deprecated)]
    let q = unsafe { command_queue::create_command_queue(ctx, d, 0).unwrap() };
    let src = "__kernel void k(__global float* x) { }";
    let prog = program::create_program_with_source(ctx, &[src]).unwrap();
    program::build_program(prog, &[d], &CString::new("").unwrap(), None, std::ptr::null_mut()).unwrap();
    let k = kernel::create_kernel(prog, &CString::new("k").unwrap()).unwrap();
    let buf = unsafe { cl3::memory::create_buffer(ctx, cl3::memory::CL_MEM_READ_WRITE, 1024, std::ptr::null_mut()).unwrap() };
    unsafe { kernel::set_kernel_arg(k, 0, std::mem::size_of::<*mut std::ffi::c_void>(), &buf as *const _ as *const _).unwrap() };
    let g = [64usize];
    let mut launch = Vec::new();
    for _ in 0..7 {
        let n = 2_000;
        let t = Instant::now();
        for _ in 0..n {
            unsafe { command_queue::enqueue_nd_range_kernel(q, k, 1, std::ptr::null(), g.as_ptr(), std::ptr::null(), 0, std::ptr::null()).unwrap() };
            command_queue::finish(q).unwrap();
        }
        launch.push(t.elapsed().as_nanos() as f64 / n as f64 / 1e3);
    }
    println!("device: {}", String::from(device::get_device_info(d, device::CL_DEVICE_NAME).unwrap()));
    println!("clGetDeviceInfo: {:.1} ns/call (median of 7 x 200k)", median(info));
    println!("enqueue+finish empty kernel: {:.2} us (median of 7 x 2k)", median(launch));
}
