//! MoE all-to-all planning (seed 000 §8.7.2–§8.7.4, seed 001 §7.2.3): expert capacity
//! C = CF·T·k/E and the tokens dropped above it for a routing distribution; what each
//! GPU sends and receives; the bytes that cross nodes and their time for a flat
//! all-to-all (every copy crosses on its own) and a hierarchical one (a token crosses
//! once per remote node it goes to, then fans out over NVLink); and what node-limited
//! routing (fraction f leaving the node) changes.

use railyard_units::quantity;
use serde::{Deserialize, Serialize};

use crate::comm::{CommInput, CommTime, Coster};
use crate::error::{positive, within, PlannerError};

pub const MAX_EXPERTS: u64 = 1 << 16;
pub const MAX_FRACTIONS: usize = 64;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeInput {
    /// T: tokens routed in one step over the EP group.
    pub tokens: u64,
    pub top_k: u64,
    pub experts: u64,
    pub capacity_factor: f64,
    /// Relative load of each expert (default: uniform). Its length must be `experts`.
    #[serde(default)]
    pub expert_load: Vec<f64>,
    /// h: bytes of one token's hidden state.
    #[serde(deserialize_with = "quantity::bytes")]
    pub token_bytes: f64,
    pub gpus: u64,
    pub gpus_per_node: u64,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub nvlink_bytes_per_sec: f64,
    #[serde(deserialize_with = "quantity::bytes_per_sec")]
    pub nic_bytes_per_sec: f64,
    /// Fractions f of a token's k copies that leave its node to compare (default: what
    /// uniform routing gives).
    #[serde(default)]
    pub off_node_fractions: Vec<f64>,
    /// Optionally, a topology to run the dispatch on as a uniform all-to-all of each
    /// GPU's send volume, flat (`direct`) and `hierarchical`, timed by the engine
    /// (`topo` and optionally `elem_bytes`; the size and algorithm are set here).
    #[serde(default)]
    pub comm: Option<CommInput>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MoeCase {
    pub off_node_fraction: f64,
    /// Distinct remote nodes per token that a hierarchical all-to-all sends to.
    pub remote_nodes_per_token: f64,
    /// Cross-node bytes of the average sender, flat (every copy) and hierarchical (once per node).
    pub flat_cross_bytes_per_gpu: f64,
    pub hierarchical_cross_bytes_per_gpu: f64,
    /// Cross-node bytes into the busiest receiver, flat.
    pub flat_cross_bytes_busiest_receiver: f64,
    /// Dispatch time: flat sends over NIC and NVLink at once (the slower decides);
    /// hierarchical crosses nodes, then fans out over NVLink.
    pub flat_secs: f64,
    pub hierarchical_secs: f64,
    /// Dispatch and combine (its transpose: the same bytes the other way).
    pub flat_round_trip_secs: f64,
    pub hierarchical_round_trip_secs: f64,
}

/// The uniform dispatch run as an all-to-all schedule on a topology.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DispatchSchedule {
    pub algorithm: String,
    pub time: CommTime,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MoeReport {
    pub capacity_tokens: u64,
    pub dropped_tokens: u64,
    pub dropped_share: f64,
    pub busiest_expert: usize,
    pub busiest_expert_tokens: u64,
    pub send_bytes_per_gpu: f64,
    /// Received by the busiest GPU after capacity drops (dispatch).
    pub max_receive_bytes_per_gpu: f64,
    pub mean_receive_bytes_per_gpu: f64,
    pub uniform_off_node_fraction: f64,
    pub cases: Vec<MoeCase>,
    /// The uniform dispatch as all-to-all schedules on the topology.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on_topology: Vec<DispatchSchedule>,
}

/// Tokens per expert: T·k copies shared by `load`, no expert above T (a token picks k
/// distinct experts), whole numbers that sum to T·k. The caller has checked that the
/// experts with load can take them (k <= experts with load > 0).
fn expert_tokens(total: u64, tokens: u64, load: &[f64]) -> Vec<u64> {
    // Water-filling: experts whose share would pass T take T; the rest share what is left.
    let mut exact = vec![0.0; load.len()];
    let mut capped = vec![false; load.len()];
    loop {
        let left = total as f64 - capped.iter().filter(|&&c| c).count() as f64 * tokens as f64;
        let sum: f64 = (0..load.len()).filter(|&i| !capped[i]).map(|i| load[i]).sum();
        let mut changed = false;
        for i in 0..load.len() {
            if !capped[i] {
                exact[i] = if sum > 0.0 { left * load[i] / sum } else { 0.0 };
                if exact[i] > tokens as f64 {
                    capped[i] = true;
                    exact[i] = tokens as f64;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut counts: Vec<u64> = exact.iter().map(|x| (x.floor() as u64).min(tokens)).collect();
    // Largest remainders first, to experts with load that are below T, round after round.
    let mut order: Vec<usize> = (0..load.len()).filter(|&i| load[i] > 0.0).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b)));
    let mut left = total.saturating_sub(counts.iter().sum());
    while left > 0 {
        let before = left;
        for &i in &order {
            if left == 0 {
                break;
            }
            if counts[i] < tokens {
                counts[i] += 1;
                left -= 1;
            }
        }
        if left == before {
            break; // unreachable when k <= experts with load (checked by the caller)
        }
    }
    counts
}

pub fn evaluate(input: &MoeInput, coster: &Coster) -> Result<MoeReport, PlannerError> {
    if input.experts == 0 || input.experts > MAX_EXPERTS {
        return Err(PlannerError::bad("moe.experts", format!("must be 1..={MAX_EXPERTS}")));
    }
    if input.top_k == 0 || input.top_k > input.experts {
        return Err(PlannerError::bad("moe.top_k", format!("must be 1..={} (the experts)", input.experts)));
    }
    if input.tokens == 0 || input.tokens > 1 << 40 {
        return Err(PlannerError::bad("moe.tokens", "must be 1..=2^40"));
    }
    if input.gpus == 0
        || input.gpus > 1 << 20
        || input.gpus_per_node == 0
        || !input.gpus.is_multiple_of(input.gpus_per_node)
    {
        return Err(PlannerError::bad("moe.gpus", "must be 1..=2^20 and a multiple of gpus_per_node"));
    }
    if !input.experts.is_multiple_of(input.gpus) {
        return Err(PlannerError::bad(
            "moe.experts",
            format!("{} experts do not spread evenly over {} GPUs", input.experts, input.gpus),
        ));
    }
    within("moe.capacity_factor", input.capacity_factor, 1e-3, 1e3)?;
    within("moe.token_bytes", input.token_bytes, 1.0, (1u64 << 30) as f64)?;
    if (input.tokens as f64) * (input.top_k as f64) * input.token_bytes / input.gpus as f64
        > crate::comm::MAX_COMM_BYTES
    {
        return Err(PlannerError::bad(
            "moe.tokens",
            "each GPU would send more than the 2^50 bytes one communication may carry",
        ));
    }
    positive("moe.token_bytes", input.token_bytes)?;
    positive("moe.nvlink_bytes_per_sec", input.nvlink_bytes_per_sec)?;
    positive("moe.nic_bytes_per_sec", input.nic_bytes_per_sec)?;
    if input.off_node_fractions.len() > MAX_FRACTIONS {
        return Err(PlannerError::bad("moe.off_node_fractions", format!("at most {MAX_FRACTIONS}")));
    }
    let load = if input.expert_load.is_empty() {
        vec![1.0; input.experts as usize]
    } else if input.expert_load.len() as u64 != input.experts {
        return Err(PlannerError::bad(
            "moe.expert_load",
            format!("has {} entries for {} experts", input.expert_load.len(), input.experts),
        ));
    } else {
        for (i, &w) in input.expert_load.iter().enumerate() {
            within(&format!("moe.expert_load[{i}]"), w, 0.0, 1e12)?;
        }
        if input.expert_load.iter().sum::<f64>() <= 0.0 {
            return Err(PlannerError::bad("moe.expert_load", "sums to zero"));
        }
        input.expert_load.clone()
    };
    let loaded = load.iter().filter(|&&w| w > 0.0).count() as u64;
    if input.top_k > loaded {
        return Err(PlannerError::bad(
            "moe.expert_load",
            format!("only {loaded} experts have load, fewer than top_k = {} distinct experts per token", input.top_k),
        ));
    }
    let copies = input.tokens * input.top_k;
    let per_expert = expert_tokens(copies, input.tokens, &load);
    // seed 000 §8.7.3: C = CF · T · k / E.
    let capacity = (input.capacity_factor * copies as f64 / input.experts as f64).floor() as u64;
    let dropped: u64 = per_expert.iter().map(|&t| t.saturating_sub(capacity)).sum();
    let busiest = (0..per_expert.len()).fold(0, |b, i| if per_expert[i] > per_expert[b] { i } else { b });
    let experts_per_gpu = (input.experts / input.gpus) as usize;
    let received: Vec<f64> = per_expert
        .chunks(experts_per_gpu)
        .map(|c| c.iter().map(|&t| t.min(capacity) as f64).sum::<f64>() * input.token_bytes)
        .collect();
    let max_receive = received.iter().copied().fold(0.0, f64::max);
    let nodes = input.gpus / input.gpus_per_node;
    let h = input.token_bytes;
    let tokens_per_gpu = input.tokens as f64 / input.gpus as f64;
    let k = input.top_k as f64;
    let uniform_f = if nodes > 1 { (nodes - 1) as f64 / nodes as f64 } else { 0.0 };
    let fractions =
        if input.off_node_fractions.is_empty() { vec![uniform_f] } else { input.off_node_fractions.clone() };
    let mut cases = Vec::new();
    for (i, &f) in fractions.iter().enumerate() {
        within(&format!("moe.off_node_fractions[{i}]"), f, 0.0, 1.0)?;
        if nodes == 1 && f > 0.0 {
            return Err(PlannerError::bad(
                format!("moe.off_node_fractions[{i}]"),
                format!("is {f}, but the {} GPUs are one node: nothing can leave it", input.gpus),
            ));
        }
        // Each of the k copies leaves the node with probability f, to one of the other
        // nodes alike: a remote node gets at least one copy with 1 - (1 - f/(n-1))^k.
        let remote_copies = k * f;
        let remote_nodes = if nodes > 1 {
            let others = (nodes - 1) as f64;
            others * (1.0 - (1.0 - f / others).powf(k))
        } else {
            0.0
        };
        let b_nic = input.nic_bytes_per_sec;
        let b_l = input.nvlink_bytes_per_sec;
        let send = tokens_per_gpu * k * h;
        let hot = max_receive;
        let flat_cross = send * f;
        let flat_cross_in = hot * f;
        // Deduplication: a node's copies of one token cross once.
        let dedup = if remote_copies > 0.0 { remote_nodes / remote_copies } else { 1.0 };
        let hier_cross = flat_cross * dedup;
        // Flat: the NIC (the average sender's or the busiest receiver's bytes) and NVLink
        // (the copies that stay) work at once; the slower decides (seed 001 §7.2.3).
        let flat = (flat_cross.max(flat_cross_in) / b_nic).max(send.max(hot) * (1.0 - f) / b_l);
        // Hierarchical: cross once per remote node, then every copy moves once over NVLink
        // to its expert (seed 000 §8.7.4), one phase after the other.
        let hier = flat_cross.max(flat_cross_in) * dedup / b_nic + send.max(hot) / b_l;
        cases.push(MoeCase {
            off_node_fraction: f,
            remote_nodes_per_token: remote_nodes,
            flat_cross_bytes_per_gpu: flat_cross,
            hierarchical_cross_bytes_per_gpu: hier_cross,
            flat_cross_bytes_busiest_receiver: flat_cross_in,
            flat_secs: flat,
            hierarchical_secs: hier,
            flat_round_trip_secs: 2.0 * flat,
            hierarchical_round_trip_secs: 2.0 * hier,
        });
    }
    let mut on_topology = Vec::new();
    if let Some(comm) = &input.comm {
        if comm.algo.is_some() || comm.size_bytes.is_some() || comm.collective.is_some() {
            return Err(PlannerError::bad(
                "moe.comm",
                "give topo (and elem_bytes); the collective, size and algorithms are the dispatch's",
            ));
        }
        let topology = coster.load(comm.topo.as_deref().unwrap_or_default(), "moe.comm")?;
        let gpus = topology.default_ranks.len() as u64;
        let placement =
            railyard_topology::Placement::new(&topology, &railyard_topology::PlacementPolicy::Contiguous, None)
                .map_err(|cause| PlannerError::Topology { field: "moe.comm.topo".into(), cause })?;
        if let Some(g) = placement.ranks_by_server(&topology).iter().find(|g| g.len() as u64 != input.gpus_per_node) {
            return Err(PlannerError::bad(
                "moe.comm.topo",
                format!("has a server of {} GPUs, the MoE section nodes of {}", g.len(), input.gpus_per_node),
            ));
        }
        if gpus != input.gpus {
            return Err(PlannerError::bad(
                "moe.comm.topo",
                format!("has {gpus} GPUs, the MoE section {}; the dispatch runs on all of them", input.gpus),
            ));
        }
        let send = tokens_per_gpu * k * h;
        for algo in ["direct", "hierarchical"] {
            let c = CommInput { collective: Some("alltoall".into()), algo: Some(algo.into()), ..comm.clone() }
                .with_size(send);
            on_topology.push(DispatchSchedule {
                algorithm: algo.to_string(),
                time: coster.time_on(&c, "moe.comm", &topology)?,
            });
        }
    }
    Ok(MoeReport {
        on_topology,
        capacity_tokens: capacity,
        dropped_tokens: dropped,
        dropped_share: dropped as f64 / copies as f64,
        busiest_expert: busiest,
        busiest_expert_tokens: per_expert[busiest],
        send_bytes_per_gpu: tokens_per_gpu * k * h,
        max_receive_bytes_per_gpu: max_receive,
        mean_receive_bytes_per_gpu: received.iter().sum::<f64>() / received.len() as f64,
        uniform_off_node_fraction: uniform_f,
        cases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> MoeInput {
        MoeInput {
            tokens: 4096,
            top_k: 2,
            experts: 16,
            capacity_factor: 1.25,
            expert_load: Vec::new(),
            token_bytes: 8192.0,
            gpus: 16,
            gpus_per_node: 8,
            nvlink_bytes_per_sec: 450e9,
            nic_bytes_per_sec: 50e9,
            off_node_fractions: vec![0.5, 0.1],
            comm: None,
        }
    }

    #[test]
    fn capacity_and_drops() {
        let r = evaluate(&input(), &Coster::new(crate::Engine::Model)).unwrap();
        // C = 1.25 × 4096 × 2 / 16 = 640; uniform routing drops nothing.
        assert_eq!((r.capacity_tokens, r.dropped_tokens), (640, 0));
        // One expert with 4x the others' load takes 4/19 of 8192 copies = 1725, drops 1085.
        let mut hot = input();
        hot.expert_load = vec![1.0; 16];
        hot.expert_load[3] = 4.0;
        let r = evaluate(&hot, &Coster::new(crate::Engine::Model)).unwrap();
        assert_eq!((r.busiest_expert, r.busiest_expert_tokens, r.dropped_tokens), (3, 1725, 1085));
    }

    #[test]
    fn zero_loads_lose_no_tokens() {
        // Every token goes to both of two experts: 16,384 each, nothing dropped.
        let mut two = input();
        (two.tokens, two.top_k, two.experts, two.gpus, two.gpus_per_node) = (16384, 2, 2, 2, 2);
        two.capacity_factor = 1.0;
        two.off_node_fractions = vec![0.0];
        two.expert_load = vec![1.0, 0.0];
        // k = 2 distinct experts but one has no load: refused.
        assert!(evaluate(&two, &Coster::new(crate::Engine::Model)).unwrap_err().to_string().contains("top_k"));
        two.expert_load = vec![1.0, 1e-9];
        let r = evaluate(&two, &Coster::new(crate::Engine::Model)).unwrap();
        assert_eq!((r.busiest_expert_tokens, r.dropped_tokens), (16384, 0));
        // T = 10, k = 3, load [100, 1, 1, 0]: experts 0-2 take 10 each, none above T.
        let mut few = input();
        (few.tokens, few.top_k, few.experts, few.gpus, few.gpus_per_node) = (10, 3, 4, 4, 4);
        few.capacity_factor = 1.0;
        few.off_node_fractions = vec![0.0];
        few.expert_load = vec![100.0, 1.0, 1.0, 0.0];
        let r = evaluate(&few, &Coster::new(crate::Engine::Model)).unwrap();
        assert_eq!(r.busiest_expert_tokens, 10);
        // C = 30/4 = 7: experts 0-2 drop 3 each.
        assert_eq!(r.dropped_tokens, 9);
    }

    #[test]
    fn no_expert_gets_more_tokens_than_there_are() {
        // Top-k picks k distinct experts: with k = E every expert gets every token.
        let mut all = input();
        all.top_k = 16;
        all.expert_load = vec![1.0; 16];
        all.expert_load[0] = 1e12;
        let r = evaluate(&all, &Coster::new(crate::Engine::Model)).unwrap();
        assert_eq!(r.busiest_expert_tokens, 4096);
        // One node: nothing leaves it.
        let mut one = input();
        one.gpus = 8;
        one.experts = 16;
        let e = evaluate(&one, &Coster::new(crate::Engine::Model)).unwrap_err().to_string();
        assert!(e.contains("moe.off_node_fractions[0]") && e.contains("one node"), "{e}");
    }

    #[test]
    fn node_limited_routing_cuts_the_cross_node_bytes() {
        let r = evaluate(&input(), &Coster::new(crate::Engine::Model)).unwrap();
        // f = 0.5 of 2 copies: 1 copy per token crosses, to the one other node.
        assert_eq!(r.cases[0].flat_cross_bytes_per_gpu, 256.0 * 1.0 * 8192.0);
        assert!(r.cases[1].flat_cross_bytes_per_gpu < r.cases[0].flat_cross_bytes_per_gpu / 4.0);
        assert!(r.cases[0].hierarchical_cross_bytes_per_gpu <= r.cases[0].flat_cross_bytes_per_gpu);
    }

    #[test]
    fn bad_shapes_are_refused() {
        let mut bad = input();
        bad.expert_load = vec![1.0; 3];
        assert!(evaluate(&bad, &Coster::new(crate::Engine::Model))
            .unwrap_err()
            .to_string()
            .contains("moe.expert_load"));
        let mut bad = input();
        bad.top_k = 17;
        assert!(evaluate(&bad, &Coster::new(crate::Engine::Model)).unwrap_err().to_string().contains("moe.top_k"));
    }
}
