//! `railyard sweep`: a grid run on every core gives the same records as four shards run
//! apart and merged; a sweep killed with SIGKILL and resumed records every point exactly
//! once; a grid too large, or a point that fails, is said so.

mod common;
use common::railyard;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("railyard-sweep-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Records by point, without their wall time.
fn records(path: &Path) -> BTreeMap<u64, serde_json::Value> {
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        let point = v["point"].as_u64().unwrap();
        v.as_object_mut().unwrap().remove("wall_secs");
        assert!(out.insert(point, v).is_none(), "point {point} recorded twice in {}", path.display());
    }
    out
}

const GRID: &str = "command = \"plan\"\n[base]\ncollective = \"allreduce\"\nalgo = \"ring,double-tree\"\n\
[axes]\ntopo = [\"rail:servers=2,gpus=4\", \"rail:servers=4,gpus=2\", \"clos:k=4\"]\nsize = { from = \"4KiB\", to = \"64MiB\", factor = 4 }\n";

#[test]
fn shards_merged_are_the_local_run() {
    let d = dir("shards");
    let grid = d.join("g.toml");
    std::fs::write(&grid, GRID).unwrap();
    let local = d.join("local.jsonl");
    let out = railyard(&["sweep", grid.to_str().unwrap(), "--out", local.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut shards = Vec::new();
    for i in 0..4 {
        let s = d.join(format!("s{i}.jsonl"));
        let out = railyard(&[
            "sweep",
            grid.to_str().unwrap(),
            "--shard",
            &format!("{i}/4"),
            "--out",
            s.to_str().unwrap(),
            "--jobs",
            "1",
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        shards.push(s);
    }
    let merged = d.join("merged.jsonl");
    let mut args = vec!["sweep", "merge"];
    let names: Vec<String> = shards.iter().map(|s| s.to_str().unwrap().to_string()).collect();
    args.extend(names.iter().map(String::as_str));
    args.extend(["--out", merged.to_str().unwrap()]);
    let out = railyard(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (a, b) = (records(&local), records(&merged));
    assert_eq!(a.len(), 24);
    assert_eq!(a, b);
    // Running it again without --resume would mix two runs: refused.
    let again = railyard(&["sweep", grid.to_str().unwrap(), "--out", local.to_str().unwrap()]);
    assert!(again.code == 2 && again.stderr.contains("--resume"), "{}", again.stderr);
    // The Slurm executor writes the array script the shards above stand for.
    let out = railyard(&[
        "sweep",
        grid.to_str().unwrap(),
        "--executor",
        "slurm",
        "--shards",
        "4",
        "--out",
        local.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let script = std::fs::read_to_string(d.join("local.sbatch")).unwrap();
    assert!(script.contains("#SBATCH --array=0-3") && script.contains("--shard ${SLURM_ARRAY_TASK_ID}/4"), "{script}");
    let report = railyard(&["sweep", "report", local.to_str().unwrap()]);
    assert!(report.code == 0 && report.stdout.contains("## Best time by size"), "{}", report.stderr);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn a_killed_sweep_resumes_and_records_every_point_once() {
    let d = dir("kill");
    let grid = d.join("g.toml");
    // 3 x 12 x 10 = 360 points, some ms each on one core.
    std::fs::write(
        &grid,
        "command = \"plan\"\n[base]\ncollective = \"allreduce\"\n[axes]\ntopo = [\"rail:servers=8\", \"rail:servers=16\", \"clos:k=8\"]\n\
         size = { from = \"1KiB\", to = \"4GiB\", factor = 4 }\nchannels = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n",
    )
    .unwrap();
    let out_path = d.join("r.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args(["sweep", grid.to_str().unwrap(), "--out", out_path.to_str().unwrap(), "--jobs", "1"])
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let lines = std::fs::read_to_string(&out_path).map(|t| t.lines().count()).unwrap_or(0);
        if lines >= 20 || start.elapsed() > Duration::from_secs(60) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    let before = std::fs::read_to_string(&out_path).unwrap().lines().count();
    assert!((20..360).contains(&before), "{before} points before the kill");
    let out = railyard(&["sweep", grid.to_str().unwrap(), "--out", out_path.to_str().unwrap(), "--resume"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let all = records(&out_path);
    assert_eq!(all.len(), 360);
    assert_eq!(all.keys().copied().collect::<Vec<_>>(), (0..360).collect::<Vec<_>>());
    // Resuming with a changed grid would mix two grids' points under one numbering.
    let changed = std::fs::read_to_string(&grid).unwrap().replace("1KiB", "2KiB");
    std::fs::write(&grid, changed).unwrap();
    let out = railyard(&["sweep", grid.to_str().unwrap(), "--out", out_path.to_str().unwrap(), "--resume"]);
    assert!(out.code == 2 && out.stderr.contains("recorded from another grid"), "{}", out.stderr);
    // Reading results (report) leaves a file that is not one alone.
    let notes = d.join("notes.txt");
    std::fs::write(&notes, "hello").unwrap();
    let out = railyard(&["sweep", "report", notes.to_str().unwrap()]);
    assert_eq!(out.code, 2);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "hello");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn too_many_points_and_failing_points_are_said() {
    let d = dir("limits");
    let grid = d.join("g.toml");
    let axes: String = (0..9).map(|i| format!("x{i} = {{ from = 1, to = 512, factor = 2 }}\n")).collect();
    std::fs::write(&grid, format!("command = \"plan\"\n[axes]\n{axes}")).unwrap();
    let out = railyard(&["sweep", grid.to_str().unwrap()]);
    assert!(out.code == 2 && out.stderr.contains("more than 1000000 points"), "{}", out.stderr);
    assert!(!d.join("g.jsonl").exists(), "no work was done");
    // A flag the command does not have fails the grid before any work.
    std::fs::write(&grid, "command = \"plan\"\n[axes]\nnosuch = [1, 2]\n").unwrap();
    let out = railyard(&["sweep", grid.to_str().unwrap()]);
    assert!(out.code == 2 && out.stderr.contains("--nosuch"), "{}", out.stderr);
    assert!(!d.join("g.jsonl").exists(), "no work was done");
    // A topology that does not exist, or is past a preset's limits, at any point of an
    // axis: refused before any work, naming the point.
    std::fs::write(
        &grid,
        "command = \"plan\"\n[axes]\ntopo = [\"rail:servers=2\", \"nosuch-preset\"]\nsize = [\"1MiB\", \"2MiB\"]\n",
    )
    .unwrap();
    let out = railyard(&["sweep", grid.to_str().unwrap()]);
    assert!(out.code == 2 && out.stderr.contains("point 1: topo nosuch-preset"), "{}", out.stderr);
    std::fs::write(&grid, "command = \"plan\"\n[axes]\ntopo = [\"rail:servers=2\", \"rail:servers=1000000\"]\n")
        .unwrap();
    let out = railyard(&["sweep", grid.to_str().unwrap()]);
    assert!(out.code == 2 && out.stderr.contains("more than the 262144"), "{}", out.stderr);
    // A size the command cannot parse at the last value of an axis, the same.
    std::fs::write(&grid, "command = \"plan\"\n[axes]\nsize = [\"1MiB\", \"2MiB\", \"3 parsecs\"]\n").unwrap();
    let out = railyard(&["sweep", grid.to_str().unwrap()]);
    assert!(out.code == 2 && out.stderr.contains("point 2 (size=\"3 parsecs\") cannot be run"), "{}", out.stderr);
    assert!(!d.join("g.jsonl").exists(), "no work was done");
    // A point the command refuses when it runs records its error; the others run.
    std::fs::write(&grid, "command = \"plan\"\n[base]\ntopo = \"clos:k=4\"\n[axes]\nalgo = [\"ring\", \"nvls\"]\n")
        .unwrap();
    let out = railyard(&["sweep", grid.to_str().unwrap()]);
    assert!(out.code == 0 && out.stdout.contains("2 points run (1 failed)"), "{} {}", out.stdout, out.stderr);
    let r = records(&d.join("g.jsonl"));
    assert!(r[&1]["error"].as_str().unwrap().contains("NVSwitch"), "{:?}", r[&1]);
    assert!(r[&0]["error"].is_null());
    std::fs::remove_dir_all(&d).ok();
}

/// A layout study: plan-training points over a job field.
#[test]
fn plan_training_points_set_job_fields() {
    let d = dir("training");
    let grid = d.join("g.toml");
    std::fs::write(
        &grid,
        "command = \"plan-training\"\n[base.job]\nmodel = \"llama3-8b\"\ntopo = \"dgx-h100:nodes=2\"\nlayout = \"search\"\nshow = 1\n\
         [axes]\n\"job.global_batch\" = [16, 32]\n",
    )
    .unwrap();
    let out = railyard(&["sweep", grid.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = records(&d.join("g.jsonl"));
    assert_eq!(r[&1]["output"]["job"]["global_batch"], 32);
    std::fs::remove_dir_all(&d).ok();
}

/// Filters and zipped axes pick the points; the table formats hold every output field;
/// the report draws a heatmap and the Pareto front of the fabrics.
#[test]
fn filters_zips_tables_heatmaps_and_the_pareto_front() {
    let d = dir("where");
    let grid = d.join("g.toml");
    // Two fabrics zipped with a channel count each; all-reduce at every size, all-gather
    // only to 64 KiB.
    std::fs::write(
        &grid,
        "command = \"plan\"\nwhere = \"collective == allreduce or size <= 64KiB\"\nzip = [[\"topo\", \"channels\"]]\n\
         [base]\nalgo = \"all\"\n[axes]\ntopo = [\"rail:servers=4,gpus=4\", \"rail:servers=4,gpus=4,over=2:1\"]\n\
         channels = [1, 2]\ncollective = [\"allreduce\", \"allgather\"]\nsize = { from = \"4KiB\", to = \"1MiB\", factor = 16 }\n",
    )
    .unwrap();
    let g = grid.to_str().unwrap();
    let listed = railyard(&["sweep", g, "--print-points"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    // 2 zipped x 2 collectives x 3 sizes = 12, less the all-gather at 1 MiB on both = 10.
    assert_eq!(listed.stdout.lines().count(), 10, "{}", listed.stdout);
    assert!(!listed.stdout.contains("collective=\"allgather\" size=1048576"), "{}", listed.stdout);
    assert!(listed
        .stdout
        .contains("channels=2 collective=\"allreduce\" size=4096 topo=\"rail:servers=4,gpus=4,over=2:1\""));
    let out = railyard(&["sweep", g, "--format", "parquet"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("10 points run (0 failed)") && out.stdout.contains("10 points as parquet"),
        "{}",
        out.stdout
    );
    assert!(std::fs::read(d.join("g.jsonl.parquet")).unwrap().starts_with(b"PAR1"));
    let results = d.join("g.jsonl");
    let csv = railyard(&["sweep", "export", results.to_str().unwrap(), "--format", "csv"]);
    assert_eq!(csv.code, 0, "{}", csv.stderr);
    let table = std::fs::read_to_string(d.join("g.jsonl.csv")).unwrap();
    let header: Vec<&str> = table.lines().next().unwrap().split(',').collect();
    assert_eq!(&header[..8], ["point", "channels", "collective", "size", "topo", "metric", "wall_secs", "error"]);
    for column in ["output.fastest", "output.hardware.switches", "output.algorithms.0.expected_secs"] {
        assert!(header.contains(&column), "{column} not in {header:?}");
    }
    assert_eq!(table.lines().count(), 11);
    let svg = d.join("r.svg");
    let report = railyard(&["sweep", "report", results.to_str().unwrap(), "--svg", svg.to_str().unwrap()]);
    assert_eq!(report.code, 0, "{}", report.stderr);
    // channels, size and topo have more than one value; the heatmap takes the two with
    // the most (size 3, then by name channels), and the fabric axes are the zipped pair.
    assert!(report.stdout.contains("## Best time by channels (rows) and size (columns)"), "{}", report.stdout);
    assert!(report.stdout.contains("Fabrics are the values of channels, topo"), "{}", report.stdout);
    assert!(report.stdout.contains("slowdown"), "{}", report.stdout);
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.contains("class=\"cell\"") && drawn.contains("Pareto front"), "{drawn}");
    let priced = railyard(&[
        "sweep",
        "report",
        results.to_str().unwrap(),
        "--heatmap",
        "size,topo",
        "--price",
        "nics=1500,switches=30000",
    ]);
    assert_eq!(priced.code, 0, "{}", priced.stderr);
    assert!(
        priced.stdout.contains("(rows) and size (columns)") && priced.stdout.contains("1500 x nics + 30000 x switches")
    );
    for (args, says) in [
        (vec!["--heatmap", "size,nosuch"], "nosuch is not an axis"),
        (vec!["--price", "cables=3"], "not a part"),
        (vec!["--price", "nics=-1"], "at least 0"),
    ] {
        let mut all = vec!["sweep", "report", results.to_str().unwrap()];
        all.extend(args);
        let out = railyard(&all);
        assert!(out.code == 2 && out.stderr.contains(says), "{all:?}: {}", out.stderr);
    }
    // A filter naming no axis, or comparing text as a number, fails before any work.
    for (filter, says) in [("nosuch == 1", "nosuch is not an axis"), ("topo > 3", "are not both numbers")] {
        std::fs::write(&grid, format!("command = \"plan\"\nwhere = \"{filter}\"\n[axes]\ntopo = [\"clos:k=4\"]\n"))
            .unwrap();
        let out = railyard(&["sweep", g, "--out", d.join("x.jsonl").to_str().unwrap()]);
        assert!(out.code == 2 && out.stderr.contains(says), "{filter}: {}", out.stderr);
        assert!(!d.join("x.jsonl").exists());
    }
    std::fs::remove_dir_all(&d).ok();
}

/// What a hostile review found: a table export cannot overwrite its own results, a
/// value the filters leave out is not checked, training topologies are checked before
/// work, a filter that keeps nothing is an error, and fabrics are told apart by the
/// topology each point asked for and compared only at one GPU count.
#[test]
fn review_findings_stay_fixed() {
    let d = dir("review");
    let grid = d.join("g.toml");
    let g = grid.to_str().unwrap();
    // A value past a preset's limits that the filter leaves out: the grid runs.
    std::fs::write(
        &grid,
        "command = \"plan\"\nwhere = \"topo != 'rail:servers=1000000'\"\n[base]\nalgo = \"ring\"\n\
         [axes]\ntopo = [\"rail:servers=2,gpus=2\", \"rail:servers=1000000\"]\n",
    )
    .unwrap();
    let out = railyard(&["sweep", g]);
    assert!(out.code == 0 && out.stdout.contains("1 points run (0 failed) of 1"), "{} {}", out.stdout, out.stderr);
    // Exporting onto the results file by another name is refused and leaves it whole.
    let results = d.join("g.jsonl");
    let before = std::fs::read(&results).unwrap();
    let other_name = format!("{}/./g.jsonl", d.display());
    let out = railyard(&["sweep", "export", results.to_str().unwrap(), "--format", "csv", "--out", &other_name]);
    assert!(out.code == 2 && out.stderr.contains("is the results file itself"), "{}", out.stderr);
    assert_eq!(std::fs::read(&results).unwrap(), before);
    // Exporting a file that is not there creates nothing.
    let missing = d.join("nosuch.jsonl");
    let out = railyard(&["sweep", "export", missing.to_str().unwrap(), "--format", "csv"]);
    assert!(out.code == 2 && out.stderr.contains("no such results file"), "{}", out.stderr);
    assert!(!d.join("nosuch.jsonl.csv").exists());
    // A where that keeps no point: said, and no results file.
    std::fs::write(&grid, "command = \"plan\"\nwhere = \"size > 1TiB\"\n[axes]\nsize = [\"1MiB\"]\n").unwrap();
    let out = railyard(&["sweep", g, "--out", d.join("none.jsonl").to_str().unwrap()]);
    assert!(out.code == 2 && out.stderr.contains("keeps none of its 1 points"), "{}", out.stderr);
    assert!(!d.join("none.jsonl").exists());
    // A training topology past its limits: refused before any work.
    std::fs::write(
        &grid,
        "command = \"plan-training\"\n[base.job]\nmodel = \"llama3-8b\"\nlayout = \"search\"\nglobal_batch = 16\n\
         [axes]\n\"job.topo\" = [\"dgx-h100:nodes=2\", \"dgx-h100:nodes=100000\"]\n",
    )
    .unwrap();
    let out = railyard(&["sweep", g, "--out", d.join("t.jsonl").to_str().unwrap()]);
    assert!(out.code == 2 && out.stderr.contains("job.topo dgx-h100:nodes=100000"), "{}", out.stderr);
    assert!(!d.join("t.jsonl").exists());
    // Two topology files with one name inside, differing in NIC speed, and a cluster of
    // another size: the two files are two fabrics; the other size is compared apart.
    for (file, nic) in [("a.toml", "25GB/s"), ("b.toml", "50GB/s")] {
        let spec = format!("rail:servers=2,gpus=2,nic={nic}");
        let path = d.join(file);
        let out = railyard(&["topo", "export", &spec, "-o", path.to_str().unwrap()]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let text =
            std::fs::read_to_string(&path).unwrap().replacen(&format!("name = \"{spec}\""), "name = \"ours\"", 1);
        std::fs::write(&path, text).unwrap();
    }
    std::fs::write(
        &grid,
        format!(
            "command = \"plan\"\n[base]\nalgo = \"ring\"\n[axes]\ntopo = [\"{}\", \"{}\", \"rail:servers=4,gpus=2\"]\nsize = [\"1MiB\", \"64MiB\"]\n",
            d.join("a.toml").display(),
            d.join("b.toml").display()
        ),
    )
    .unwrap();
    let fabrics = d.join("fabrics.jsonl");
    let out = railyard(&["sweep", g, "--out", fabrics.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report = railyard(&["sweep", "report", fabrics.to_str().unwrap()]);
    assert_eq!(report.code, 0, "{}", report.stderr);
    let text = &report.stdout;
    assert!(text.contains("### 4 GPUs") && text.contains("### 8 GPUs"), "{text}");
    assert!(text.contains("2 of 2 fabrics on the front") || text.contains("1 of 2 fabrics on the front"), "{text}");
    assert!(text.contains("One fabric with 8 GPUs: nothing to compare."), "{text}");
    std::fs::remove_dir_all(&d).ok();
}
