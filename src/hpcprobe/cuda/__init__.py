"""CUDA as hpcprobe uses it: the toolkit found (nvcc, its version, the GPU architectures it
builds for, cuBLAS), the driver's version, and our GPU program built with that nvcc on first
use, cached per toolkit, driver, architectures and source."""
