//! The checks the fuzz targets run, as the Go build's fuzz tests
//! (go/internal/trace/fuzz_test.go) do: a reader must return a list or a
//! well-formed error for any input, and a list it accepts must keep the
//! readers' promises and read the same once written back.

use partita_engine::trace::{self, Node, ParseError, Pod};

// The promises, written once for the engine's tests and these targets.
#[path = "../../engine/src/trace/invariants.rs"]
mod invariants;

/// Fuzzes `trace::parse_nodes`.
pub fn check_nodes(data: &[u8]) {
    let nodes = match trace::parse_nodes(data, "fuzz.csv") {
        Ok(nodes) => nodes,
        Err(e) => return check_failure(&e),
    };
    if let Err(e) = invariants::nodes_invariant(&nodes) {
        panic!("accepted nodes break a promise: {e}");
    }
    let mut out = String::from("sn,cpu_milli,memory_mib,gpu,model\n");
    for n in &nodes {
        let cpu = n.cpu_milli.to_string();
        let mem = n.memory_mib.to_string();
        let gpus = n.gpus.to_string();
        write_row(&mut out, &[&n.name, &cpu, &mem, &gpus, &n.model]);
    }
    let again = trace::parse_nodes(&out, "again.csv")
        .unwrap_or_else(|e| panic!("re-reading accepted nodes: {e}\n{out}"));
    assert_eq!(
        without_node_lines(again),
        without_node_lines(nodes),
        "round trip"
    );
}

/// Fuzzes `trace::parse_pods`.
pub fn check_pods(data: &[u8]) {
    let pods = match trace::parse_pods(data, "fuzz.csv") {
        Ok(pods) => pods,
        Err(e) => return check_failure(&e),
    };
    if let Err(e) = invariants::pods_invariant(&pods) {
        panic!("accepted pods break a promise: {e}");
    }
    // Written back in the full layout, the rows must read the same: nothing
    // the reader accepted was half-understood.
    let mut out = String::from(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n",
    );
    let time = |t: Option<i64>| t.map(|t| t.to_string()).unwrap_or_default();
    for p in &pods {
        let cells = [
            p.cpu_milli.to_string(),
            p.memory_mib.to_string(),
            p.num_gpu.to_string(),
            p.gpu_milli.to_string(),
            time(p.creation_time),
            time(p.deletion_time),
            time(p.scheduled_time),
        ];
        write_row(
            &mut out,
            &[
                &p.name,
                &cells[0],
                &cells[1],
                &cells[2],
                &cells[3],
                &p.gpu_spec_raw,
                &p.qos,
                &p.phase,
                &cells[4],
                &cells[5],
                &cells[6],
            ],
        );
    }
    let again = trace::parse_pods(&out, "again.csv")
        .unwrap_or_else(|e| panic!("re-reading accepted pods: {e}\n{out}"));
    assert_eq!(
        without_pod_lines(again),
        without_pod_lines(pods),
        "round trip"
    );
}

/// The shape every failure must have: a position that makes sense and a
/// message.
fn check_failure(e: &ParseError) {
    assert!(
        e.column.is_none() || e.line >= 1,
        "cell error without a line: {e:?}"
    );
    assert!(!e.to_string().is_empty(), "empty message: {e:?}");
    assert!(std::error::Error::source(e).is_some(), "no cause: {e:?}");
}

/// One CSV row as Go's encoding/csv writes it: a field is quoted when it
/// holds a comma, a quote or a line end, starts with white space, or is
/// `\.`.
fn write_row(out: &mut String, fields: &[&str]) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let quote = *f == "\\."
            || f.contains([',', '"', '\r', '\n'])
            || f.chars().next().is_some_and(char::is_whitespace);
        if quote {
            out.push('"');
            out.push_str(&f.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(f);
        }
    }
    out.push('\n');
}

// Lines differ after a round trip (blank lines are not written back), so
// the comparison ignores them.

fn without_node_lines(mut nodes: Vec<Node>) -> Vec<Node> {
    for n in &mut nodes {
        n.line = 0;
    }
    nodes
}

fn without_pod_lines(mut pods: Vec<Pod>) -> Vec<Pod> {
    for p in &mut pods {
        p.line = 0;
    }
    pods
}

/// Fuzzes the MIG layout parser and the geometry that reads layouts, as
/// the Go build's FuzzParseLayout and FuzzValidate do: any text gives a
/// layout or an error; an accepted layout reads the same once written
/// back; on every MIG model, `validate` answers without panicking, a
/// layout it accepts has every instance inside the GPU and no two
/// overlapping, and each place `free_placements` offers keeps the layout
/// valid.
pub fn check_mig_layout(data: &[u8]) {
    use partita_engine::gpu::{self, Layout, MEMORY_SLICES};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(layout) = Layout::parse(text) else {
        return;
    };
    let again = Layout::parse(&layout.to_string())
        .unwrap_or_else(|e| panic!("{text:?} parsed as {layout}, which does not parse: {e}"));
    assert_eq!(again, layout, "{text:?}: round trip");
    for m in gpu::catalog().iter().filter(|m| m.mig) {
        if m.validate(&layout).is_err() {
            continue;
        }
        let mut used = 0u8;
        for pl in layout.iter() {
            let p = m
                .profile(&pl.profile)
                .expect("a valid layout's profiles exist");
            assert!(
                pl.start >= 0 && pl.start + p.memory <= MEMORY_SLICES,
                "{layout} on {}: outside the GPU",
                m.name
            );
            let mask = p.mask(pl.start);
            assert_eq!(used & mask, 0, "{layout} on {}: instances overlap", m.name);
            used |= mask;
        }
        for p in &m.profiles {
            let places = m
                .free_placements(&layout, &p.name)
                .expect("a valid layout and a known profile");
            for pl in places {
                let mut grown = layout.clone();
                grown.push(pl.clone());
                assert!(
                    m.validate(&grown).is_ok(),
                    "{pl} offered beside {layout} on {} breaks it",
                    m.name
                );
            }
        }
    }
}

/// Fuzzes `scenario::parse` as the Go build's FuzzParse
/// (go/internal/scenario/fuzz_test.go) does: any input gives a Scenario or
/// an error naming the file; a Scenario revalidates, builds its nodes and,
/// when small, jobs that validate.
pub fn check_scenario(data: &[u8]) {
    use partita_engine::scenario::{self, TRACE};
    let s = match scenario::parse(data, "fuzz.yaml") {
        Ok(s) => s,
        Err(e) => {
            assert!(
                e.file == "fuzz.yaml" && !e.message.is_empty(),
                "error {e:?} does not name the file and the problem"
            );
            return;
        }
    };
    if let Err(e) = s.validate() {
        panic!("accepted, then validate says: {e}");
    }
    if s.gpus() > 4096 {
        return; // valid, but too big to build in a fuzz iteration
    }
    if let Err(e) = s.nodes() {
        panic!("accepted, then nodes says: {e}");
    }
    let mut expected = 0.0;
    for w in &s.workloads {
        if w.arrival.process == TRACE {
            return; // reads files
        }
        let mut tasks = w.replicas.max(1) as f64;
        for &size in &w.gang.sizes {
            tasks = tasks.max(size as f64);
        }
        expected += (w.arrival.rate_per_hour * scenario::duration::hours(s.duration)
            + w.arrival.at.len() as f64)
            * tasks;
    }
    if expected > 10_000.0 {
        return;
    }
    let mut no_files =
        |path: &str| -> Result<Vec<u8>, String> { panic!("read {path}: no trace arrivals") };
    let arrivals = match s.jobs(s.seed, &mut no_files) {
        Ok(a) => a,
        Err(e) => panic!("accepted, then jobs says: {e}"),
    };
    for a in arrivals {
        if let Err(e) = a.job.validate(None) {
            panic!("job {} does not validate: {e}", a.job.id);
        }
    }
}
