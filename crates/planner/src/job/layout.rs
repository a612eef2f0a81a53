//! A parallel layout: tensor (TP), context (CP), pipeline (PP) and data (DP)
//! parallelism, experts (EP) carved out of the data-parallel ranks, interleaved
//! pipeline stages and the micro-batch. Ranks are ordered TP → CP → PP → DP from the
//! inside out (seed 002's rank order; Megatron-Core's default puts DP inside PP), so a
//! TP group is consecutive GPUs of one server and a DP group one GPU per pipeline
//! replica.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::shape::ModelShape;

/// The most layouts one search weighs.
pub const MAX_LAYOUTS: usize = 20_000;
/// The largest degree of any dimension.
pub const MAX_DEGREE: u64 = 1 << 17;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    pub tp: u64,
    #[serde(default = "one")]
    pub cp: u64,
    pub pp: u64,
    pub dp: u64,
    /// Expert parallelism, within the data- and context-parallel ranks.
    #[serde(default = "one")]
    pub ep: u64,
    /// Virtual pipeline stages per GPU (the interleaved 1F1B schedule).
    #[serde(default = "one")]
    pub vpp: u64,
    /// Sequences per micro-batch.
    #[serde(default = "one")]
    pub micro_batch: u64,
}

fn one() -> u64 {
    1
}

/// A layout as a job gives it: the parallel degrees, and the virtual stages and
/// micro-batch if known (left out, the ones that run fastest are searched).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutInput {
    pub tp: u64,
    #[serde(default = "one")]
    pub cp: u64,
    pub pp: u64,
    pub dp: u64,
    #[serde(default = "one")]
    pub ep: u64,
    #[serde(default)]
    pub vpp: Option<u64>,
    #[serde(default)]
    pub micro_batch: Option<u64>,
}

impl LayoutInput {
    /// Every layout it stands for: unstated virtual stages from 1, 2, 4, 8 and
    /// micro-batches from 1, 2, 4, 8.
    pub fn layouts(&self) -> Vec<Layout> {
        let vpps = self.vpp.map_or_else(|| vec![1, 2, 4, 8], |v| vec![v]);
        let mbs = self.micro_batch.map_or_else(|| vec![1, 2, 4, 8], |m| vec![m]);
        let mut out = Vec::new();
        for &vpp in &vpps {
            for &micro_batch in &mbs {
                out.push(Layout { tp: self.tp, cp: self.cp, pp: self.pp, dp: self.dp, ep: self.ep, vpp, micro_batch });
            }
        }
        out
    }
}

impl Layout {
    /// This layout, as a job file states it.
    pub fn as_input(&self) -> LayoutInput {
        LayoutInput {
            tp: self.tp,
            cp: self.cp,
            pp: self.pp,
            dp: self.dp,
            ep: self.ep,
            vpp: Some(self.vpp),
            micro_batch: Some(self.micro_batch),
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TP{} CP{} PP{} DP{}", self.tp, self.cp, self.pp, self.dp)?;
        if self.ep > 1 {
            write!(f, " EP{}", self.ep)?;
        }
        if self.vpp > 1 {
            write!(f, " VP{}", self.vpp)?;
        }
        write!(f, " mb{}", self.micro_batch)
    }
}

/// A dimension of the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Tp,
    Cp,
    Pp,
    /// The data-parallel ranks of dense weights: DP × CP.
    DenseDp,
    Ep,
    /// The data-parallel ranks of one expert's weights: DP × CP / EP.
    ExpertDp,
}

impl Layout {
    /// Layers of the busiest pipeline stage, as a share of the model's: stages take
    /// ⌈layers / PP⌉ where the split is uneven (Llama 3 gave its first and last stages
    /// one fewer).
    pub fn stage_share(&self, layers: u64) -> f64 {
        layers.div_ceil(self.pp) as f64 / layers as f64
    }

    /// GPUs the layout fills (saturating: a product past u64 is refused as too many).
    pub fn gpus(&self) -> u64 {
        self.tp.saturating_mul(self.cp).saturating_mul(self.pp).saturating_mul(self.dp)
    }

    /// Micro-batches each pipeline runs per step for `global_batch` sequences.
    pub fn micro_batches(&self, global_batch: u64) -> u64 {
        global_batch / (self.dp * self.micro_batch)
    }

    /// The ranks of `dim`'s group that holds rank 0 (every group of a dimension has
    /// the same shape on a uniform machine). Ranks: tp + TP·(cp + CP·(pp + PP·dp)).
    pub fn group(&self, dim: Dim) -> Vec<u64> {
        let (tp, cp, pp) = (self.tp, self.cp, self.pp);
        let rank = |c: u64, p: u64, d: u64| c * tp + p * tp * cp + d * tp * cp * pp;
        match dim {
            Dim::Tp => (0..tp).collect(),
            Dim::Cp => (0..cp).map(|c| rank(c, 0, 0)).collect(),
            Dim::Pp => (0..pp).map(|p| rank(0, p, 0)).collect(),
            Dim::DenseDp => (0..self.dp).flat_map(|d| (0..cp).map(move |c| rank(c, 0, d))).collect(),
            // EP spans consecutive ranks of DP × CP; the expert's replicas stride by EP.
            Dim::Ep => self.group(Dim::DenseDp).into_iter().take(self.ep as usize).collect(),
            Dim::ExpertDp => self.group(Dim::DenseDp).into_iter().step_by(self.ep as usize).collect(),
        }
    }

    /// Every group of `dim`, `group(dim)` first: it moved to each place of the other
    /// dimensions, so that every rank is in exactly one. The groups of a dimension run
    /// their collective at the same time.
    pub fn groups(&self, dim: Dim) -> Vec<Vec<u64>> {
        let (tp, cp, pp, dp) = (self.tp, self.cp, self.pp, self.dp);
        let rank = |t: u64, c: u64, p: u64, d: u64| t + tp * (c + cp * (p + pp * d));
        let moved = |shifts: Vec<u64>, first: Vec<u64>| -> Vec<Vec<u64>> {
            shifts.into_iter().map(|s| first.iter().map(|r| r + s).collect()).collect()
        };
        let each = |n: u64| 0..n;
        match dim {
            Dim::Tp => moved(
                each(dp).flat_map(|d| each(pp).flat_map(move |p| each(cp).map(move |c| rank(0, c, p, d)))).collect(),
                self.group(dim),
            ),
            Dim::Cp => moved(
                each(dp).flat_map(|d| each(pp).flat_map(move |p| each(tp).map(move |t| rank(t, 0, p, d)))).collect(),
                self.group(dim),
            ),
            Dim::Pp => moved(
                each(dp).flat_map(|d| each(cp).flat_map(move |c| each(tp).map(move |t| rank(t, c, 0, d)))).collect(),
                self.group(dim),
            ),
            Dim::DenseDp => {
                moved(each(pp).flat_map(|p| each(tp).map(move |t| rank(t, 0, p, 0))).collect(), self.group(dim))
            }
            Dim::Ep => self
                .groups(Dim::DenseDp)
                .into_iter()
                .flat_map(|g| g.chunks(self.ep.max(1) as usize).map(<[u64]>::to_vec).collect::<Vec<_>>())
                .collect(),
            Dim::ExpertDp => self
                .groups(Dim::DenseDp)
                .into_iter()
                .flat_map(|g| {
                    (0..self.ep.max(1) as usize)
                        .map(|o| g.iter().skip(o).step_by(self.ep.max(1) as usize).copied().collect())
                        .collect::<Vec<_>>()
                })
                .collect(),
        }
    }

    /// Why this layout cannot run `shape` on `gpus` GPUs with `global_batch` sequences
    /// (with `domain` GPUs per NVLink domain), or `None`.
    pub fn problem(&self, shape: &ModelShape, gpus: u64, global_batch: u64, domain: u64) -> Option<String> {
        let dims = [self.tp, self.cp, self.pp, self.dp, self.ep, self.vpp, self.micro_batch];
        if dims.iter().any(|&d| d == 0 || d > MAX_DEGREE) {
            return Some(format!("every degree must be 1..={MAX_DEGREE}"));
        }
        if self.gpus() != gpus {
            // In u128: four degrees of up to 2^17 multiply to at most 2^68.
            let product = [self.tp, self.cp, self.pp, self.dp].iter().map(|&d| d as u128).product::<u128>();
            return Some(format!(
                "TP × CP × PP × DP = {} × {} × {} × {} = {product} GPUs, but the job has {gpus}",
                self.tp, self.cp, self.pp, self.dp,
            ));
        }
        if !shape.kv_heads().is_multiple_of(self.tp) && !self.tp.is_multiple_of(shape.kv_heads())
            || !shape.heads.is_multiple_of(self.tp)
        {
            return Some(format!(
                "TP {} does not split {} heads ({} key/value heads)",
                self.tp,
                shape.heads,
                shape.kv_heads()
            ));
        }
        if self.tp > domain {
            return Some(format!("TP {} is larger than the {domain} GPUs of an NVLink domain", self.tp));
        }
        if self.cp > 1 && !shape.seq_len.is_multiple_of(2 * self.cp) {
            return Some(format!("CP {} does not split the {}-token sequence in 2·CP pieces", self.cp, shape.seq_len));
        }
        if self.pp * self.vpp > shape.layers {
            return Some(format!("{} layers do not fill PP {} × VP {} stages", shape.layers, self.pp, self.vpp));
        }
        if self.vpp > 1 && self.pp == 1 {
            return Some("virtual pipeline stages need PP > 1".into());
        }
        if !global_batch.is_multiple_of(self.dp * self.micro_batch) {
            return Some(format!(
                "the batch of {global_batch} sequences does not split into DP {} × micro-batches of {}",
                self.dp, self.micro_batch
            ));
        }
        let m = self.micro_batches(global_batch);
        if self.vpp > 1 && !m.is_multiple_of(self.pp) {
            return Some(format!("interleaving needs the {m} micro-batches to be a multiple of PP {}", self.pp));
        }
        if self.ep > 1
            && (!shape.is_moe()
                || !shape.experts.is_multiple_of(self.ep)
                || !(self.dp * self.cp).is_multiple_of(self.ep))
        {
            return Some(format!(
                "EP {} must divide the {} experts and DP × CP = {}",
                self.ep,
                shape.experts,
                self.dp * self.cp
            ));
        }
        None
    }
}

fn divisors_up_to(n: u64, cap: u64) -> Vec<u64> {
    (1..=n.min(cap)).filter(|d| n.is_multiple_of(*d)).collect()
}

fn powers_of_two_up_to(cap: u64) -> Vec<u64> {
    (0..).map(|k| 1u64 << k).take_while(|&d| d <= cap).collect()
}

/// Every layout of `shape` on `gpus` GPUs that passes [`Layout::problem`]: TP within
/// the NVLink domain, CP and micro-batches in powers of two, PP dividing the layers, up
/// to 4 virtual stages, EP a power of two dividing the experts. (How many there were,
/// and the first `MAX_LAYOUTS`.)
pub fn enumerate(shape: &ModelShape, gpus: u64, global_batch: u64, domain: u64) -> (usize, Vec<Layout>) {
    let mut out = Vec::new();
    let mut count = 0;
    let cps = powers_of_two_up_to(16.min(shape.seq_len / 2).max(1));
    let eps: Vec<u64> = if shape.is_moe() {
        powers_of_two_up_to(shape.experts).into_iter().filter(|e| shape.experts.is_multiple_of(*e)).collect()
    } else {
        vec![1]
    };
    for tp in divisors_up_to(gpus, domain) {
        for &cp in &cps {
            for pp in divisors_up_to(shape.layers, 128)
                .into_iter()
                .chain([16, 32, 64].into_iter().filter(|p| !shape.layers.is_multiple_of(*p) && *p < shape.layers))
            {
                let per_replica = tp * cp * pp;
                if !gpus.is_multiple_of(per_replica) {
                    continue;
                }
                let dp = gpus / per_replica;
                for vpp in [1, 2, 4] {
                    for &ep in &eps {
                        for micro_batch in [1, 2, 4, 8] {
                            let l = Layout { tp, cp, pp, dp, ep, vpp, micro_batch };
                            if l.problem(shape, gpus, global_batch, domain).is_none() {
                                count += 1;
                                if out.len() < MAX_LAYOUTS {
                                    out.push(l);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    (count, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::shape::preset;

    #[test]
    fn groups_follow_the_rank_order() {
        let l = Layout { tp: 2, cp: 2, pp: 2, dp: 2, ep: 2, vpp: 1, micro_batch: 1 };
        assert_eq!(l.group(Dim::Tp), vec![0, 1]);
        assert_eq!(l.group(Dim::Cp), vec![0, 2]);
        assert_eq!(l.group(Dim::Pp), vec![0, 4]);
        assert_eq!(l.group(Dim::DenseDp), vec![0, 2, 8, 10]);
        assert_eq!(l.group(Dim::Ep), vec![0, 2]);
        assert_eq!(l.group(Dim::ExpertDp), vec![0, 8]);
    }

    /// The groups of each dimension hold every rank once, the first being `group`.
    #[test]
    fn the_groups_of_a_dimension_hold_every_rank_once() {
        for l in [
            Layout { tp: 2, cp: 2, pp: 2, dp: 2, ep: 2, vpp: 1, micro_batch: 1 },
            Layout { tp: 8, cp: 1, pp: 4, dp: 6, ep: 3, vpp: 1, micro_batch: 1 },
            Layout { tp: 1, cp: 3, pp: 1, dp: 4, ep: 4, vpp: 1, micro_batch: 1 },
        ] {
            for dim in [Dim::Tp, Dim::Cp, Dim::Pp, Dim::DenseDp, Dim::Ep, Dim::ExpertDp] {
                let groups = l.groups(dim);
                assert_eq!(groups[0], l.group(dim), "{l} {dim:?}");
                assert!(groups.iter().all(|g| g.len() == groups[0].len()), "{l} {dim:?}");
                let mut all: Vec<u64> = groups.into_iter().flatten().collect();
                all.sort_unstable();
                assert_eq!(all, (0..l.gpus()).collect::<Vec<_>>(), "{l} {dim:?}");
            }
        }
        let l = Layout { tp: 2, cp: 2, pp: 2, dp: 2, ep: 2, vpp: 1, micro_batch: 1 };
        assert_eq!(l.groups(Dim::Pp)[1], vec![1, 5]);
        assert_eq!(l.groups(Dim::DenseDp)[1], vec![1, 3, 9, 11]);
    }

    #[test]
    fn bad_layouts_say_why() {
        let m = preset("llama3-70b").unwrap();
        let l = Layout { tp: 8, cp: 1, pp: 3, dp: 1, ep: 1, vpp: 1, micro_batch: 1 };
        assert!(l.problem(&m, 24, 16, 8).is_none());
        let l = Layout { tp: 8, cp: 1, pp: 81, dp: 1, ep: 1, vpp: 1, micro_batch: 1 };
        assert!(l.problem(&m, 648, 16, 8).unwrap().contains("80 layers"));
        let l = Layout { tp: 16, cp: 1, pp: 1, dp: 1, ep: 1, vpp: 1, micro_batch: 1 };
        assert!(l.problem(&m, 16, 16, 8).unwrap().contains("NVLink domain"));
        let l = Layout { tp: 8, cp: 1, pp: 2, dp: 2, ep: 1, vpp: 1, micro_batch: 1 };
        assert!(l.problem(&m, 64, 16, 8).unwrap().contains("32 GPUs, but the job has 64"));
    }

    #[test]
    fn every_enumerated_layout_fills_the_job() {
        let m = preset("llama3-70b").unwrap();
        let (n, all) = enumerate(&m, 1024, 512, 8);
        assert_eq!(n, all.len());
        assert!(n > 100, "{n}");
        assert!(all.iter().all(|l| l.gpus() == 1024));
    }
}
