//! This file is the one place that holds workload memory facts. Each row
//! derives its peak GPU memory from first principles, term by term; the test
//! adds the terms up and checks the sum against `peak_memory_mib`, so a changed
//! assumption cannot leave a stale total behind.
//!
//! The arithmetic:
//! - weights: parameters × bytes per parameter (bf16/fp16 2 B, fp8/int8 1 B).
//! - KV cache (decoder LLMs): 2 (K and V) × layers × KV width × bytes ×
//!   tokens held, where KV width = KV heads × head dim (the hidden size for
//!   models without grouped-query attention) and tokens held = concurrent
//!   sequences × context. Kwon et al. 2023 (vLLM, SOSP), §2.3, works the
//!   same formula for a 13B model: 2 × 5120 × 40 × 2 B = 800 KB per token.
//! - training model states: 16 B per parameter for mixed-precision Adam
//!   (2 B bf16 weights + 2 B bf16 gradients + 4 B fp32 master weights +
//!   4 + 4 B Adam moments), Rajbhandari et al. 2020 (ZeRO, SC20), §3.1;
//!   sharded over N GPUs by ZeRO-3/FSDP it is 16 B × params / N.
//! - training activations: with activation checkpointing each layer keeps
//!   its input (s·b·h × 2 B) and one layer at a time is recomputed, holding
//!   34·s·b·h bytes (Korthikanti et al. 2022, "Reducing Activation
//!   Recomputation in Large Transformer Models", §4: sbh(34 + 5as/h); the
//!   5as/h attention-score term is gone with FlashAttention).
//! - CUDA context, cuBLAS/cuDNN workspaces and allocator slack: 0.5–1 GiB
//!   per process, as nvidia-smi shows for an idle PyTorch process; we
//!   budget 768 MiB, or 1–1.5 GiB where NCCL buffers come on top.
//! - the caching allocator's reserve: PyTorch keeps freed blocks for
//!   reuse, so a process holds more than its tensors take. Measured at
//!   the peak on an H200 (shared/reference/h200-measurements.md): a LoRA
//!   fine-tune step of Llama-2-7B reserved 25,848 MiB for 23,462 MiB
//!   allocated (+10.2 %); a 2,048-token prefill of Llama-2-7B 14,470 for
//!   14,106 (+2.6 %). Every profile adds its kind's share of its tensors
//!   (every term but the context) as a term of its own (`add_reserve`).
//! - CUDA context: a PyTorch process with cuBLAS loaded held 685 MiB
//!   beside its tensors on the same H200; the 768 MiB budgeted below
//!   covers it.
//!
//! Model shapes come from the public model cards and config.json files named
//! in each Basis (Hugging Face), or the papers cited there. Budgets that are
//! choices rather than facts (batch sizes, token budgets) say so.
//!
//! Compute is the share of one H100's compute a task needs to meet a typical
//! latency or throughput target; it is an operator's estimate, not a
//! derived figure, and it decides the MIG profile only when it is larger
//! than the memory alone implies (rerank, diffusion).

use super::{Derivation, Kind, Measurement, Profile, Term};

/// One MiB in bytes; budgets below are written in MiB × MIB.
pub(super) const MIB: f64 = (1 << 20) as f64;

/// Where the measurements of this catalog were made.
const H200: &str = "NVIDIA H200 SXM, driver 580.159.04, CUDA 13.0, PyTorch 2.11, 2026-12-04 \
                    (shared/reference/h200-measurements.md)";

/// The caching allocator's reserve over the bytes a process's tensors
/// take, by kind, as measured on an H200 (reserved over allocated at the
/// peak, rounded up to a tenth of a percent; see above).
const RESERVE_INFERENCE: f64 = 0.026;
const RESERVE_TRAINING: f64 = 0.102;

/// The CUDA context + library workspaces + allocator slack per process
/// (see above).
const CTX_MIB: f64 = 768.0;

fn term(what: &str, bytes: f64) -> Term {
    Term {
        what: what.to_string(),
        bytes,
    }
}

/// Inserts the allocator's reserve before the last term, the CUDA context,
/// which every derivation ends with: the reserve is a share of the terms
/// before it, the tensors (added in order, as the Go build adds them).
fn add_reserve(p: &mut Profile) {
    let terms = &mut p.derivation.terms;
    let last = terms.len() - 1;
    let mut tensors = 0.0;
    for t in &terms[..last] {
        tensors += t.bytes;
    }
    let (what, rate) = match p.kind {
        Kind::Inference => (
            "caching allocator reserve: 2.6 % of the tensors (an inference prefill on an H200)",
            RESERVE_INFERENCE,
        ),
        Kind::Training => (
            "caching allocator reserve: 10.2 % of the tensors (a training step on an H200)",
            RESERVE_TRAINING,
        ),
    };
    terms.insert(last, term(what, rate * tensors));
}

/// The catalog, in its order: inference small to large, then training,
/// each with its allocator reserve added. Ported from
/// go/internal/profiles/catalog.go at commit c501232; the arithmetic is
/// the Go file's, term for term (every product written out is a whole
/// number below 2^53, so f64 evaluates it exactly, as Go's constant
/// arithmetic does).
pub(super) fn build() -> Vec<Profile> {
    let mut catalog = rows();
    for p in &mut catalog {
        add_reserve(p);
    }
    catalog
}

fn rows() -> Vec<Profile> {
    vec![
        Profile {
            name: "embed-335m".to_string(),
            kind: Kind::Inference,
            peak_memory_mib: 1818,
            compute: 0.10,
            gpus: 0,
            cpu_milli: 2000,
            host_memory_mib: 8 * 1024,
            measured: Vec::new(),
            derivation: Derivation {
                basis: "BGE-large-en-v1.5 class encoder (BAAI/bge-large-en-v1.5 config: 335M params, 24 layers, hidden 1024, 16 heads, FFN 4096), fp16, batches of 32 texts × 512 tokens".to_string(),
                terms: vec![
                    term("weights: 335e6 params × 2 B (fp16)", 335e6 * 2.0),
                    term("attention scores of one layer: 32 × 16 heads × 512 × 512 × 2 B", 32.0 * 16.0 * 512.0 * 512.0 * 2.0),
                    term("FFN activations of one layer: 32 × 512 tokens × 4096 × 2 B", 32.0 * 512.0 * 4096.0 * 2.0),
                    term("CUDA context and workspaces", CTX_MIB * MIB),
                ],
            },
        },
        Profile {
            name: "rerank-568m".to_string(),
            kind: Kind::Inference,
            peak_memory_mib: 2668,
            compute: 0.25,
            gpus: 0,
            cpu_milli: 4000,
            host_memory_mib: 16 * 1024,
            measured: Vec::new(),
            derivation: Derivation {
                basis: "bge-reranker-v2-m3 class cross-encoder (XLM-RoBERTa-large: 568M params, 24 layers, hidden 1024, 16 heads, FFN 4096), fp16, 64 query-passage pairs × 512 tokens per batch; every query scores ~100 passages, so it is compute-bound: two compute slices".to_string(),
                terms: vec![
                    term("weights: 568e6 params × 2 B (fp16)", 568e6 * 2.0),
                    term("attention scores of one layer: 64 × 16 heads × 512 × 512 × 2 B", 64.0 * 16.0 * 512.0 * 512.0 * 2.0),
                    term("FFN activations of one layer: 64 × 512 tokens × 4096 × 2 B", 64.0 * 512.0 * 4096.0 * 2.0),
                    term("CUDA context and workspaces", CTX_MIB * MIB),
                ],
            },
        },
        Profile {
            name: "recsys-dlrm".to_string(),
            kind: Kind::Inference,
            peak_memory_mib: 6401,
            compute: 0.12,
            gpus: 0,
            cpu_milli: 4000,
            host_memory_mib: 32 * 1024,
            measured: Vec::new(),
            derivation: Derivation {
                basis: "DLRM-style ranking model (Naumov et al. 2019, arXiv:1906.00091); sizes are our assumption for a mid-size ranker: a 20M-row hot embedding cache of 128-dim fp16 rows on the GPU (the full tables stay in host memory), 50M MLP params, batches of 4,096 requests".to_string(),
                terms: vec![
                    term("hot embedding cache: 20e6 rows × 128 dims × 2 B (fp16)", 20e6 * 128.0 * 2.0),
                    term("MLP weights: 50e6 params × 2 B", 50e6 * 2.0),
                    term("batch activations and feature buffers (budget)", 512.0 * MIB),
                    term("CUDA context and workspaces", CTX_MIB * MIB),
                ],
            },
        },
        Profile {
            name: "speech-whisper-large".to_string(),
            kind: Kind::Inference,
            peak_memory_mib: 10900,
            compute: 0.14,
            gpus: 0,
            cpu_milli: 8000,
            host_memory_mib: 32 * 1024,
            measured: Vec::new(),
            derivation: Derivation {
                basis: "Whisper large-v3 (openai/whisper-large-v3 config: 1.55B params, 32 decoder layers, d_model 1280, 1,500 encoder positions, 448 decoder positions), fp16, 16 30-second chunks decoded together, greedy; one compute slice keeps up with real time for that batch".to_string(),
                terms: vec![
                    term("weights: 1.55e9 params × 2 B (fp16)", 1.55e9 * 2.0),
                    term("decoder KV cache: 2 × 32 layers × 1280 × 2 B × (448 self + 1,500 cross positions) × 16 chunks", 2.0 * 32.0 * 1280.0 * 2.0 * (448.0 + 1500.0) * 16.0),
                    term("encoder activations for 16 × 1,500 frames (budget)", 2048.0 * MIB),
                    term("CUDA context and workspaces", CTX_MIB * MIB),
                ],
            },
        },
        Profile {
            name: "notebook-small".to_string(),
            kind: Kind::Inference,
            peak_memory_mib: 7515,
            compute: 0.10,
            gpus: 0,
            cpu_milli: 2000,
            host_memory_mib: 16 * 1024,
            measured: Vec::new(),
            derivation: Derivation {
                basis: "interactive notebook: a person exploring with a ≤1.3B-param model in bf16. Not serving, but sized and placed like it (a memory profile on a small slice), so its Kind is inference".to_string(),
                terms: vec![
                    term("weights: 1.3e9 params × 2 B (bf16)", 1.3e9 * 2.0),
                    term("scratch tensors, small forward/backward passes (budget)", 4096.0 * MIB),
                    term("CUDA context and workspaces", CTX_MIB * MIB),
                ],
            },
        },
        Profile {
            name: "llm-8b-fp8".to_string(),
            kind: Kind::Inference,
            peak_memory_mib: 13879,
            compute: 0.25,
            gpus: 0,
            cpu_milli: 4000,
            host_memory_mib: 32 * 1024,
            measured: Vec::new(),
            derivation: Derivation {
                basis: "Llama-3-8B (meta-llama/Meta-Llama-3-8B config: 8.03B params, 32 layers, 8 KV heads × 128 dims, GQA) with fp8 weights and fp8 KV cache (vLLM kv_cache_dtype=fp8); KV budget 16 concurrent sequences × 4,096 tokens = 65,536 tokens".to_string(),
                terms: vec![
                    term("weights: 8.03e9 params × 1 B (fp8)", 8.03e9 * 1.0),
                    term("KV cache: 2 × 32 layers × (8 × 128) × 1 B × 65,536 tokens", 2.0 * 32.0 * 8.0 * 128.0 * 1.0 * 65536.0),
                    term("activations: one 2,048-token prefill chunk (budget)", 1024.0 * MIB),
                    term("CUDA context and workspaces", CTX_MIB * MIB),
                ],
            },
        },
        Profile {
            name: "diffusion-sdxl".to_string(),
            kind: Kind::Inference,
            peak_memory_mib: 12873,
            compute: 0.40,
            gpus: 0,
            cpu_milli: 4000,
            host_memory_mib: 32 * 1024,
            measured: Vec::new(),
            derivation: Derivation {
                basis: "Stable Diffusion XL base (Podell et al. 2023, arXiv:2307.01952: UNet 2.6B params, text encoders CLIP ViT-L + OpenCLIP ViT-bigG 817M, VAE 84M), fp16, one 1024×1024 image at a time with classifier-free guidance; denoising is compute-bound, so it needs three compute slices".to_string(),
                terms: vec![
                    term("weights: (2.6e9 + 0.817e9 + 0.084e9) params × 2 B (fp16)", (2.6e9 + 0.817e9 + 0.084e9) * 2.0),
                    term("UNet activations: batch 2 (guidance) × 128×128 latents (budget)", 3072.0 * MIB),
                    term("VAE decode of one 1024×1024 image, untiled (budget)", 2048.0 * MIB),
                    term("CUDA context and workspaces", CTX_MIB * MIB),
                ],
            },
        },
        Profile {
            name: "llm-7b-bf16".to_string(),
            kind: Kind::Inference,
            peak_memory_mib: 31819,
            compute: 0.40,
            gpus: 0,
            cpu_milli: 4000,
            host_memory_mib: 32 * 1024,
            measured: vec![Measurement {
                place: H200.to_string(),
                config: "one 2,048-token sequence (the profile budgets 32,768 tokens of KV): the derivation for it is 13,480e6 B of weights + 1,024 MiB of KV + the 1,024 MiB activation budget, + 2.6 % reserve + 768 MiB of context; the prefill's transient was 197 MiB, so the activation budget is generous".to_string(),
                // 14,470 MiB reserved at the peak + 685 MiB of context.
                held_mib: 14470 + 685,
                derived_mib: 16060,
            }],
            derivation: Derivation {
                basis: "Llama-2-7B (meta-llama/Llama-2-7b-hf config: 6.74B params, 32 layers, hidden 4096, 32 KV heads, no GQA), bf16; KV budget 16 concurrent sequences × 2,048 tokens = 32,768 tokens".to_string(),
                terms: vec![
                    term("weights: 6.74e9 params × 2 B (bf16)", 6.74e9 * 2.0),
                    term("KV cache: 2 × 32 layers × 4096 × 2 B × 32,768 tokens (0.5 MiB per token)", 2.0 * 32.0 * 4096.0 * 2.0 * 32768.0),
                    term("activations: one 2,048-token prefill chunk (budget)", 1024.0 * MIB),
                    term("CUDA context and workspaces", CTX_MIB * MIB),
                ],
            },
        },
        Profile {
            name: "llm-13b-bf16".to_string(),
            kind: Kind::Inference,
            peak_memory_mib: 53564,
            compute: 0.70,
            gpus: 0,
            cpu_milli: 8000,
            host_memory_mib: 64 * 1024,
            measured: Vec::new(),
            derivation: Derivation {
                basis: "Llama-2-13B (meta-llama/Llama-2-13b-hf config: 13.02B params, 40 layers, hidden 5120, 40 KV heads), bf16; KV budget 16 concurrent sequences × 2,048 tokens = 32,768 tokens".to_string(),
                terms: vec![
                    term("weights: 13.02e9 params × 2 B (bf16)", 13.02e9 * 2.0),
                    term("KV cache: 2 × 40 layers × 5120 × 2 B × 32,768 tokens (800 KiB per token)", 2.0 * 40.0 * 5120.0 * 2.0 * 32768.0),
                    term("activations: one 2,048-token prefill chunk (budget)", 1024.0 * MIB),
                    term("CUDA context and workspaces", CTX_MIB * MIB),
                ],
            },
        },
        Profile {
            name: "llm-70b-bf16".to_string(),
            kind: Kind::Inference,
            peak_memory_mib: 46329,
            compute: 1.0,
            gpus: 4,
            cpu_milli: 16000,
            host_memory_mib: 256 * 1024,
            measured: Vec::new(),
            derivation: Derivation {
                basis: "Llama-2-70B (meta-llama/Llama-2-70b-hf config: 68.98B params, 80 layers, 8 KV heads × 128 dims, GQA), bf16, tensor-parallel over 4 GPUs of one NVLink domain; figures are per GPU. KV budget 32 concurrent sequences × 4,096 tokens = 131,072 tokens. On 2 GPUs the same budget needs 86 GiB per GPU (64 GiB weights + 20 GiB KV + 2 GiB) and does not fit; 4 is the next tensor-parallel size".to_string(),
                terms: vec![
                    term("weights: 68.98e9 params × 2 B (bf16) / 4 GPUs", 68.98e9 * 2.0 / 4.0),
                    term("KV cache: 2 × 80 layers × (8 × 128) × 2 B × 131,072 tokens / 4 GPUs", 2.0 * 80.0 * 8.0 * 128.0 * 2.0 * 131072.0 / 4.0),
                    term("activations: one 2,048-token prefill chunk (budget)", 1024.0 * MIB),
                    term("CUDA context, workspaces and NCCL buffers", 1024.0 * MIB),
                ],
            },
        },
        Profile {
            name: "lora-ft-7b".to_string(),
            kind: Kind::Training,
            peak_memory_mib: 26537,
            compute: 1.0,
            gpus: 1,
            cpu_milli: 8000,
            host_memory_mib: 64 * 1024,
            measured: vec![Measurement {
                place: H200.to_string(),
                config: "the profile's own: rank 16 on q, k, v, o, micro-batch 8 × 2,048, activation checkpointing, bf16 autocast".to_string(),
                // 25,848 MiB reserved at the peak of the second step + 685 MiB of context.
                held_mib: 25848 + 685,
                derived_mib: 26537,
            }],
            derivation: Derivation {
                basis: "LoRA fine-tune of Llama-2-7B on one GPU: frozen bf16 base, rank-16 adapters on q, k, v, o; micro-batch 8 × 2,048 tokens with activation checkpointing. It would fit a 40 GB slice, but training is compute-bound and wants all 7 slices, so it takes a whole GPU".to_string(),
                terms: vec![
                    term("frozen weights: 6.74e9 params × 2 B (bf16)", 6.74e9 * 2.0),
                    term("adapters: 32 layers × 4 matrices × 2 × 4096 × 16 rank = 16.8M params × 16 B (Adam states)", 32.0 * 4.0 * 2.0 * 4096.0 * 16.0 * 16.0),
                    term("checkpointed layer inputs: 32 layers × 8 × 2,048 × 4096 × 2 B", 32.0 * 8.0 * 2048.0 * 4096.0 * 2.0),
                    term("one layer recomputed: 34 × 2,048 × 8 × 4096 B", 34.0 * 2048.0 * 8.0 * 4096.0),
                    term("logits and their gradient in fp32: 2 × 8 × 2,048 × 32,000 vocab × 4 B", 2.0 * 8.0 * 2048.0 * 32000.0 * 4.0),
                    term("CUDA context and workspaces", CTX_MIB * MIB),
                ],
            },
        },
        Profile {
            name: "full-ft-7b".to_string(),
            kind: Kind::Training,
            peak_memory_mib: 61833,
            compute: 1.0,
            gpus: 8,
            cpu_milli: 96000,
            host_memory_mib: 768 * 1024,
            measured: Vec::new(),
            derivation: Derivation {
                basis: "full fine-tune of Llama-2-7B, one task per 8-GPU node, FSDP hybrid shard (ZeRO-3 inside the node, replicated across nodes, so per-GPU memory does not depend on the gang size); figures are per GPU; micro-batch 16 × 4,096 tokens with activation checkpointing, the largest that fits. Without sharding the model states alone are 100 GiB per GPU. It needs whole 80 GB GPUs: ~55 GiB does not fit a 40 GB card, and the per-layer all-gather/reduce-scatter needs NVLink peer access, which MIG instances do not have".to_string(),
                terms: vec![
                    term("model states: 16 B × 6.74e9 params / 8 GPUs", 16.0 * 6.74e9 / 8.0),
                    term("checkpointed layer inputs: 32 layers × 16 × 4,096 × 4096 × 2 B", 32.0 * 16.0 * 4096.0 * 4096.0 * 2.0),
                    term("one layer recomputed: 34 × 4,096 × 16 × 4096 B", 34.0 * 4096.0 * 16.0 * 4096.0),
                    term("logits and their gradient in fp32: 2 × 16 × 4,096 × 32,000 vocab × 4 B", 2.0 * 16.0 * 4096.0 * 32000.0 * 4.0),
                    term("FSDP gather buffers: 2 layers × 202.4e6 params × 2 B", 2.0 * 202.4e6 * 2.0),
                    term("CUDA context, workspaces and NCCL buffers", 1536.0 * MIB),
                ],
            },
        },
        Profile {
            name: "pretrain-13b-worker".to_string(),
            kind: Kind::Training,
            peak_memory_mib: 44695,
            compute: 1.0,
            gpus: 1,
            cpu_milli: 12000,
            host_memory_mib: 128 * 1024,
            measured: Vec::new(),
            derivation: Derivation {
                basis: "one rank of a Llama-2-13B-shaped pre-training job (40 layers, hidden 5120, FFN 13824), FSDP/ZeRO-3 over the gang; figures are per GPU for the smallest gang we run (8 ranks: larger gangs need less); micro-batch 4 × 4,096 tokens with activation checkpointing. ~40 GiB rules out 40 GB cards with any headroom, and the collectives need whole GPUs".to_string(),
                terms: vec![
                    term("model states: 16 B × 13.02e9 params / 8 ranks", 16.0 * 13.02e9 / 8.0),
                    term("checkpointed layer inputs: 40 layers × 4 × 4,096 × 5120 × 2 B", 40.0 * 4.0 * 4096.0 * 5120.0 * 2.0),
                    term("one layer recomputed: 34 × 4,096 × 4 × 5120 B", 34.0 * 4096.0 * 4.0 * 5120.0),
                    term("logits and their gradient in fp32: 2 × 4 × 4,096 × 32,000 vocab × 4 B", 2.0 * 4.0 * 4096.0 * 32000.0 * 4.0),
                    term("FSDP gather buffers: 2 layers × 317.2e6 params × 2 B", 2.0 * 317.2e6 * 2.0),
                    term("CUDA context, workspaces and NCCL buffers", 1536.0 * MIB),
                ],
            },
        },
    ]
}
