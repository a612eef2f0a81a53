//! NCCL's default tuner constants (`src/graph/tuning.cc`, NCCL 2.30.7), as
//! docs/sources.md#nccl-tuner says where. Latencies in µs, bandwidths
//! in GB/s (per channel for the `PER_CH_*` tables). Rows by algorithm in NCCL's index
//! order (Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT), columns by
//! protocol (LL, LL128, Simple).

/// `baseLatencies[algorithm][protocol]`.
pub const BASE_LATENCY_US: [[f64; 3]; 7] = [
    [6.8, 14.0, 8.4], // Tree
    [6.6, 14.0, 8.4], // Ring
    [0.0, 0.0, 0.0],  // CollNetDirect
    [0.0, 0.0, 0.0],  // CollNetChain
    [0.0, 0.0, 0.0],  // NVLS
    [0.0, 0.0, 0.0],  // NVLSTree
    [8.0, 8.0, 8.0],  // PAT
];

/// `hwLatencies[hardware][algorithm][protocol]`, hardware NVLINK, PCI, NET.
pub const HW_LATENCY_US: [[[f64; 3]; 7]; 3] = [
    // NVLINK
    [
        [0.6, 1.25, 4.0],
        [0.6, 1.9, 3.4],
        [0.0, 0.0, 3.7],
        [0.0, 0.0, 2.8],
        [0.0, 0.0, 25.0],
        [0.0, 0.0, 25.0],
        [0.0, 0.0, 4.0],
    ],
    // PCI
    [
        [1.0, 1.9, 4.0],
        [1.0, 2.5, 5.7],
        [0.0, 0.0, 3.7],
        [0.0, 0.0, 2.8],
        [0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0],
        [0.0, 0.0, 4.0],
    ],
    // NET
    [
        [5.0, 8.5, 14.0],
        [2.7, 4.0, 14.0],
        [0.0, 0.0, 31.0],
        [0.0, 0.0, 30.0],
        [0.0, 0.0, 18.0],
        [0.0, 0.0, 20.9],
        [0.0, 0.0, 14.0],
    ],
];

/// `llMaxBws[index1][index2]`: rows Volta, Ampere, Hopper, Blackwell on one node (and,
/// across nodes, row 0 for Intel CPUs, row 1 for AMD); columns 1, 2, 4+ nodes.
pub const LL_MAX_BW: [[f64; 3]; 4] =
    [[39.0, 39.0, 20.4], [87.7, 22.5, 19.0], [141.0, 45.0, 35.0], [2.0 * 141.0, 2.0 * 45.0, 2.0 * 35.0]];

/// `perChMaxRingLL128Bws[arch][nodes column]`.
pub const PER_CH_MAX_RING_LL128_BW: [[f64; 3]; 4] =
    [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 36.7], [40.0, 40.0, 40.0]];

/// `perChMaxTreeLL128Bws[arch][nodes column]`.
pub const PER_CH_MAX_TREE_LL128_BW: [[f64; 3]; 4] =
    [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 29.0], [55.6, 31.67, 20.0]];

/// `perChMaxTreeBws[arch][nodes column]`.
pub const PER_CH_MAX_TREE_BW: [[f64; 3]; 4] =
    [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [38.7, 41.4, 36.0], [70.0, 42.8, 24.0]];

/// `perChMaxNVLSTreeBws[arch][nodes column]`.
pub const PER_CH_MAX_NVLS_TREE_BW: [[f64; 3]; 4] =
    [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [0.0, 57.7, 45.5], [0.0, 96.0, 80.0]];

/// `nvlsEfficiency[arch]`.
pub const NVLS_EFFICIENCY: [f64; 4] = [0.0, 0.0, 0.85, 0.74];

/// `treeCorrectionFactor[protocol][log2(bytes / 64)]` for sizes 64 B to 256 MiB
/// (`src/enqueue.cc`): trees run slower than the model at medium sizes.
pub const TREE_CORRECTION: [[f64; 24]; 3] = [
    [
        1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0,
        1.0, 1.0,
    ],
    [
        1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0,
        1.0, 1.0,
    ],
    [
        0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9,
        0.9, 0.9,
    ],
];

/// Threads per channel the kernels may use, `Max NThreads` of the tuning table:
/// [algorithm][protocol] (0 where the pair does not exist).
pub const MAX_THREADS: [[usize; 3]; 7] =
    [[512, 640, 512], [512, 640, 512], [0, 0, 640], [0, 0, 640], [0, 0, 640], [0, 0, 640], [0, 0, 512]];

/// `NCCL_LL_THREAD_THRESHOLD`, `NCCL_LL128_THREAD_THRESHOLD`, `NCCL_SIMPLE_THREAD_THRESHOLD`:
/// bytes per thread below which channels are dropped (Ring LL's is multiplied by the ranks).
pub const THREAD_THRESHOLD: [usize; 3] = [8, 8, 64];

/// CollNet's Simple threshold replaces the default (§1.8).
pub const COLLNET_SIMPLE_THREAD_THRESHOLD: usize = 512;
