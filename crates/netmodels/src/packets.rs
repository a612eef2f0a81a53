//! Packets over several paths, delivered in order (the reordering model of seed 001
//! §7.5.3, used by `multipath` and `spray`): each path serialises its packets back to
//! back from time 0; a packet arrives after its path's delay; packet i is delivered
//! when it and every packet before it have arrived. A lost packet is sent again on its
//! path once its recovery delay has passed since its first send ended.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    pub bytes_per_sec: f64,
    pub delay_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PacketTimes {
    pub path: usize,
    pub sent_secs: f64,
    pub arrival_secs: f64,
    pub delivered_secs: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    pub packets: Vec<PacketTimes>,
    pub completion_secs: f64,
    pub peak_reorder_packets: usize,
    pub peak_reorder_bytes: f64,
}

/// Packet i on path i mod `paths`.
pub fn round_robin(count: usize, paths: usize) -> Vec<usize> {
    (0..count).map(|i| i % paths.max(1)).collect()
}

/// `counts[p]` packets on path p, interleaved smoothly: packet i goes to the path
/// furthest behind its share of the first i+1 packets.
pub fn split(counts: &[usize]) -> Vec<usize> {
    let total: usize = counts.iter().sum();
    let mut given = vec![0usize; counts.len()];
    (0..total)
        .map(|i| {
            let lag = |p: usize| counts[p] as f64 * (i + 1) as f64 / total as f64 - given[p] as f64;
            let p = (0..counts.len())
                .filter(|&p| given[p] < counts[p])
                .max_by(|&a, &b| lag(a).total_cmp(&lag(b)).then(b.cmp(&a)))
                .unwrap_or(0);
            given[p] += 1;
            p
        })
        .collect()
}

/// Deliver packets of `packet_bytes` (the last may be shorter: `message_bytes` in total).
pub fn deliver(
    message_bytes: f64,
    packet_bytes: f64,
    paths: &[Path],
    assignment: &[usize],
    lost: &[(usize, f64)],
) -> Delivery {
    let count = assignment.len();
    let size = |i: usize| (message_bytes - i as f64 * packet_bytes).clamp(0.0, packet_bytes);
    let mut path_free = vec![0.0f64; paths.len()];
    let mut packets: Vec<PacketTimes> = Vec::with_capacity(count);
    for (i, &p) in assignment.iter().enumerate() {
        let sent = path_free[p] + size(i) / paths[p].bytes_per_sec;
        path_free[p] = sent;
        packets.push(PacketTimes {
            path: p,
            sent_secs: sent,
            arrival_secs: sent + paths[p].delay_secs,
            delivered_secs: 0.0,
        });
    }
    for &(i, recovery) in lost {
        if i < count {
            let p = packets[i].path;
            let start = (packets[i].sent_secs + recovery).max(path_free[p]);
            let sent = start + size(i) / paths[p].bytes_per_sec;
            path_free[p] = sent;
            packets[i].sent_secs = sent;
            packets[i].arrival_secs = sent + paths[p].delay_secs;
        }
    }
    let mut last = 0.0f64;
    for pk in &mut packets {
        last = last.max(pk.arrival_secs);
        pk.delivered_secs = last;
    }
    // Reorder buffer: arrived but not yet delivered; it only grows at arrivals.
    let mut peak = (0usize, 0.0f64);
    for pk in &packets {
        let t = pk.arrival_secs;
        let (n, b) = packets
            .iter()
            .enumerate()
            .filter(|(_, q)| q.arrival_secs <= t && q.delivered_secs > t)
            .fold((0, 0.0), |(n, b), (j, _)| (n + 1, b + size(j)));
        if n > peak.0 {
            peak = (n, b);
        }
    }
    Delivery { completion_secs: last, peak_reorder_packets: peak.0, peak_reorder_bytes: peak.1, packets }
}
