//! Sweeping sizes: each algorithm's time per size, the fastest per size and where it
//! changes (the crossovers).

use serde::Serialize;

use crate::error::ModelError;
use crate::plan::plan_on;
use crate::request::CollectiveRequest;
use crate::selection::{nccl_family, NcclRule};
use railyard_topology::{Placement, Topology};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    pub bytes: u64,
    pub secs: f64,
    /// bytes / secs
    pub algbw_bytes_per_sec: f64,
    /// algbw x the collective's bus factor (nccl-tests, seed 000 §8.8.1)
    pub busbw_bytes_per_sec: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepSeries {
    pub algorithm: String,
    pub points: Vec<SweepPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Crossover {
    /// The first swept size at which `to` is fastest.
    pub bytes: u64,
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    pub bytes: u64,
    pub fastest: String,
    pub nccl: NcclRule,
    pub agrees_with_nccl: bool,
    /// Whether an algorithm of NCCL's pick was among those swept.
    pub nccl_family_compared: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sweep {
    pub topology: String,
    pub collective: railyard_schedule::Collective,
    pub ranks: usize,
    pub sizes: Vec<u64>,
    pub series: Vec<SweepSeries>,
    pub rows: Vec<SweepRow>,
    pub crossovers: Vec<Crossover>,
}

/// Sizes from `from` to `to` multiplying by `factor`, rounded up to whole elements.
pub fn sweep_sizes(from: u64, to: u64, factor: u64, elem_bytes: u64) -> Result<Vec<u64>, ModelError> {
    if factor < 2 || from == 0 || from > to || elem_bytes == 0 {
        return Err(ModelError::BadInput {
            field: "sweep".into(),
            message: "needs 0 < FROM <= TO and a factor of at least 2".into(),
        });
    }
    let mut sizes = Vec::new();
    let mut s = from;
    while s <= to && sizes.len() < 200 {
        sizes.push(s.div_ceil(elem_bytes) * elem_bytes);
        s = s.saturating_mul(factor);
    }
    // The range's end is always swept, even when the factor steps over it.
    if sizes.last().is_some_and(|&l| l < to) {
        sizes.push(to.div_ceil(elem_bytes) * elem_bytes);
    }
    sizes.dedup();
    Ok(sizes)
}

/// Algorithms within 1% of each other are treated as tied.
pub const TIE_MARGIN: f64 = 0.01;

/// `template` at every size of `sizes`: each algorithm's time, the fastest per size
/// (a leader keeps its place through near-ties) and where it changes.
pub fn sweep(topology: &Topology, template: &CollectiveRequest, sizes: &[u64]) -> Result<Sweep, ModelError> {
    let placement = &Placement::new(topology, &template.placement, template.ranks).map_err(ModelError::Placement)?;
    let mut series: Vec<SweepSeries> = Vec::new();
    let mut rows = Vec::new();
    let factor = template.collective.bus_bandwidth_factor(placement.len());
    for &bytes in sizes {
        // A size no algorithm runs at has no row (the others still do).
        let p = match plan_on(topology, placement, &CollectiveRequest { bytes, ..template.clone() }) {
            Err(ModelError::NothingRuns { .. }) => continue,
            p => p?,
        };
        for b in &p.algorithms {
            let point = SweepPoint {
                bytes,
                secs: b.total_secs,
                algbw_bytes_per_sec: crate::closed_form::algbw(bytes as f64, b.total_secs),
                busbw_bytes_per_sec: crate::closed_form::algbw(bytes as f64, b.total_secs) * factor,
            };
            match series.iter_mut().find(|s| s.algorithm == b.name) {
                Some(s) => s.points.push(point),
                None => series.push(SweepSeries { algorithm: b.name.clone(), points: vec![point] }),
            }
        }
        if let Some(c) = p.choice.clone() {
            // A leader keeps its place until another algorithm beats it by more than
            // TIE_MARGIN, so near-ties do not read as crossovers.
            let previous = rows.last().map(|r: &SweepRow| r.fastest.clone());
            let keep = previous.and_then(|name| {
                let t = p.algorithms.iter().find(|b| b.name == name)?.total_secs;
                (t <= c.secs * (1.0 + TIE_MARGIN)).then_some(name)
            });
            let fastest = keep.unwrap_or(c.algorithm);
            let agrees = nccl_family(&fastest)
                == Some(if c.nccl.algorithm.starts_with("ring") { "ring" } else { c.nccl.algorithm })
                || c.agrees_with_nccl;
            rows.push(SweepRow {
                bytes,
                fastest,
                agrees_with_nccl: agrees,
                nccl_family_compared: c.nccl_family_compared,
                nccl: c.nccl,
            });
        }
    }
    let crossovers = rows
        .windows(2)
        .filter(|w| w[0].fastest != w[1].fastest)
        .map(|w| Crossover { bytes: w[1].bytes, from: w[0].fastest.clone(), to: w[1].fastest.clone() })
        .collect();
    Ok(Sweep {
        topology: topology.name.clone(),
        collective: template.collective,
        ranks: placement.len(),
        sizes: sizes.to_vec(),
        series,
        rows,
        crossovers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_step_by_the_factor_and_end_at_the_range() {
        assert_eq!(sweep_sizes(8, 64, 2, 4).unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(sweep_sizes(3, 10, 2, 4).unwrap(), vec![4, 8, 12]);
        assert_eq!(sweep_sizes(8, 40, 4, 4).unwrap(), vec![8, 32, 40]);
        assert!(sweep_sizes(0, 10, 2, 4).is_err());
    }
}
