"""PyTorch's autocast op lists (the "Autocast Op Reference" of torch.amp), by device type and policy.

Names are PyTorch's public function names (`linalg.vecdot`, `fft.rfft`, `cross_entropy`). fnx applies a
policy where the function of that name is defined (`fnx.ops.autocast.autocast_op`); a listed name fnx does
not have is kept here so that the table reads as PyTorch's, and docs/nn-optim-data.md says which are missing.

- "lower": floating inputs (not float64) are cast to the autocast dtype (bfloat16 or float16).
- "fp32": floating inputs are cast to float32; a `dtype=` the caller passes is kept.
- "promote": floating inputs are cast to the widest of them (float32 if any is float32).
- "banned": the op raises under autocast (binary_cross_entropy on CUDA: use the `_with_logits` form).
"""
from __future__ import annotations

_CPU_LOWER = """
    conv1d conv2d conv3d bmm mm linalg.vecdot baddbmm addmm addbmm linear matmul conv_tbc
    conv_transpose1d conv_transpose2d conv_transpose3d prelu scaled_dot_product_attention"""

_CPU_FP32 = """
    avg_pool3d binary_cross_entropy grid_sample polar prod quantile nanquantile stft cdist trace view_as_complex
    cholesky cholesky_inverse cholesky_solve inverse lu_solve orgqr ormqr pinverse max_pool3d max_unpool2d
    max_unpool3d adaptive_avg_pool3d reflection_pad1d reflection_pad2d replication_pad1d replication_pad2d
    replication_pad3d mse_loss cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss poisson_nll_loss
    smooth_l1_loss cross_entropy l1_loss huber_loss margin_ranking_loss soft_margin_loss triplet_margin_loss
    multi_margin_loss ctc_loss kl_div multilabel_margin_loss binary_cross_entropy_with_logits
    fft.fft fft.ifft fft.fft2 fft.ifft2 fft.fftn fft.ifftn fft.rfft fft.irfft fft.rfft2 fft.irfft2 fft.rfftn
    fft.irfftn fft.hfft fft.ihfft linalg.cond linalg.matrix_rank linalg.solve linalg.cholesky linalg.svdvals
    linalg.eigvals linalg.eigvalsh linalg.inv linalg.householder_product linalg.tensorinv linalg.tensorsolve
    fake_quantize_per_tensor_affine geqrf qr svd triangular_solve fractional_max_pool2d fractional_max_pool3d
    adaptive_max_pool3d linalg.qr linalg.cholesky_ex linalg.svd linalg.eig linalg.eigh linalg.lstsq linalg.inv_ex"""

_CPU_PROMOTE = "stack cat index_copy"

_CUDA_LOWER = """
    conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d prelu addmm addmv addr
    matmul einsum mm mv linalg.vecdot linear addbmm baddbmm bmm chain_matmul linalg.multi_dot
    scaled_dot_product_attention"""

_CUDA_FP32 = """
    acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow softplus layer_norm
    group_norm norm cosine_similarity poisson_nll_loss cosine_embedding_loss nll_loss hinge_embedding_loss kl_div
    l1_loss smooth_l1_loss huber_loss mse_loss margin_ranking_loss multilabel_margin_loss soft_margin_loss
    triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits dist pdist cdist renorm logsumexp
    prod softmax log_softmax softmin cumprod cumsum linalg.vector_norm linalg.matrix_norm sum cross_entropy
    normalize"""

_CUDA_PROMOTE = "addcdiv addcmul atan2 bilinear cross dot grid_sample index_put tensordot scatter_add"

LISTS: dict[str, dict[str, tuple[str, ...]]] = {
    "cpu": {"lower": tuple(_CPU_LOWER.split()), "fp32": tuple(_CPU_FP32.split()),
            "promote": tuple(_CPU_PROMOTE.split())},
    "cuda": {"lower": tuple(_CUDA_LOWER.split()), "fp32": tuple(_CUDA_FP32.split()),
             "promote": tuple(_CUDA_PROMOTE.split()), "banned": ("binary_cross_entropy",)},
}

# device type -> {op name -> policy}
POLICIES: dict[str, dict[str, str]] = {
    device: {name: policy for policy, names in lists.items() for name in names} for device, lists in LISTS.items()}
