"""Fused denoise step. The PyTorch reference is the CPU path; Triton kernels run on CUDA when available."""

from parafill_kernels.dispatch import denoise_backend_name, denoise_step, lm_head_denoise_step

__all__ = ["denoise_backend_name", "denoise_step", "lm_head_denoise_step"]
