//! Does a write before the start of a sub-buffer land in its parent, where a front guard can
//! see it? (The evaluator's front guard relies on it.) Prints what the parent holds around the
//! sub-buffer's start after a kernel wrote y[-1] = 1.0 and y[0..16] = 2.0.
use cl3::{command_queue, context, device, kernel, memory, platform, program};
use std::ffi::{c_void, CString};

fn main() {
    let platforms = platform::get_platform_ids().unwrap();
    let all: Vec<_> = platforms.iter().flat_map(|p| device::get_device_ids(*p, device::CL_DEVICE_TYPE_ALL).unwrap_or_default()).collect();
    let is_gpu = |d: &_| device::get_device_info(*d, device::CL_DEVICE_TYPE).map(|t| u64::from(t) & device::CL_DEVICE_TYPE_GPU != 0).unwrap_or(false);
    let d = all.iter().copied().find(is_gpu).unwrap_or(all[0]);
    println!("device: {}", String::from(device::get_device_info(d, device::CL_DEVICE_NAME).unwrap()));
    println!("base addr align (bits): {}", u32::from(device::get_device_info(d, device::CL_DEVICE_MEM_BASE_ADDR_ALIGN).unwrap()));
    let ctx = context::create_context(&[d], std::ptr::null(), None, std::ptr::null_mut()).unwrap();
    #[allow(deprecated)]
    let q = unsafe { command_queue::create_command_queue(ctx, d, 0).unwrap() };
    let src = "__kernel void k(__global float* y) { int i = get_global_id(0); if (i == 0) y[-1] = 1.0f; y[i] = 2.0f; }";
    let prog = program::create_program_with_source(ctx, &[src]).unwrap();
    program::build_program(prog, &[d], &CString::new("").unwrap(), None, std::ptr::null_mut()).unwrap();
    let k = kernel::create_kernel(prog, &CString::new("k").unwrap()).unwrap();
    for front in [65536usize, 4096, 512] {
        let total = front + 4096;
        let parent = unsafe { memory::create_buffer(ctx, memory::CL_MEM_READ_WRITE, total, std::ptr::null_mut()).unwrap() };
        let pattern = vec![0xABu8; total];
        unsafe { command_queue::enqueue_write_buffer(q, parent, 1, 0, total, pattern.as_ptr() as *const c_void, 0, std::ptr::null()).unwrap() };
        let region = memory::cl_buffer_region { origin: front, size: 4096 };
        let sub = unsafe {
            memory::create_sub_buffer(parent, memory::CL_MEM_READ_WRITE, memory::CL_BUFFER_CREATE_TYPE_REGION, &region as *const _ as *const c_void).unwrap()
        };
        unsafe { kernel::set_kernel_arg(k, 0, std::mem::size_of::<*mut c_void>(), &sub as *const _ as *const c_void).unwrap() };
        let g = [16usize];
        unsafe { command_queue::enqueue_nd_range_kernel(q, k, 1, std::ptr::null(), g.as_ptr(), std::ptr::null(), 0, std::ptr::null()).unwrap() };
        command_queue::finish(q).unwrap();
        let mut back = vec![0u8; total];
        unsafe { command_queue::enqueue_read_buffer(q, parent, 1, 0, total, back.as_mut_ptr() as *mut c_void, 0, std::ptr::null()).unwrap() };
        let f = |at: usize| f32::from_le_bytes(back[at..at + 4].try_into().unwrap());
        let changed = back[..front].iter().filter(|b| **b != 0xAB).count();
        println!(
            "front {front}: parent[front-4..front] = {:?} ({}), parent[front..front+4] = {} ; bytes of the front guard changed: {changed}",
            &back[front - 4..front],
            f(front - 4),
            f(front)
        );
        // The same bytes read through the sub-buffer's own view of the region after it.
        let mut via_sub = vec![0u8; 8];
        unsafe { command_queue::enqueue_read_buffer(q, sub, 1, 0, 8, via_sub.as_mut_ptr() as *mut c_void, 0, std::ptr::null()).unwrap() };
        println!("   sub[0..2] = {:?}", [f32::from_le_bytes(via_sub[0..4].try_into().unwrap()), f32::from_le_bytes(via_sub[4..8].try_into().unwrap())]);
    }
}
