"""Fused denoise step. The PyTorch reference is the CPU path; Triton kernels run on CUDA when available."""

from kernels.dispatch import denoise_step, denoise_backend_name, lm_head_denoise_step

__all__ = ["denoise_step", "denoise_backend_name", "lm_head_denoise_step"]
