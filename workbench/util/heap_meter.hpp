#pragma once
// How many heap bytes a call allocates. A program that calls peak_extra_heap_bytes links
// heap_meter.cpp, which replaces the global operator new and delete with counting ones (over
// malloc and free), for the whole program.
#include <cstddef>
#include <functional>

namespace workbench {

/// The largest number of bytes in use on the heap during `call`, beyond those in use before it:
/// what the call's temporaries and result cost, as malloc_usable_size counts them. Allocations
/// outside operator new (OpenBLAS's own buffers, C's malloc) are not counted.
std::size_t peak_extra_heap_bytes(const std::function<void()>& call);

}  // namespace workbench
