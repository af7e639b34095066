//! fit_test.go.

use super::*;
use crate::placement::{Code, Filter, Fit, explain, slices_for};

/// One node, what runs on it, and one task to fit.
struct FitCase {
    name: &'static str,
    node: NodeBuilder,
    running: Vec<RunningBuilder>,
    task: TaskBuilder,
    /// GPUs cordoned after the tasks started.
    cordoned: Vec<usize>,
    /// None: fits.
    want: Option<Code>,
}

fn case(name: &'static str, node: NodeBuilder, task: TaskBuilder) -> FitCase {
    FitCase {
        name,
        node,
        running: Vec::new(),
        task,
        cordoned: Vec::new(),
        want: None,
    }
}

impl FitCase {
    fn running(mut self, r: RunningBuilder) -> Self {
        self.running.push(r);
        self
    }
    fn cordon(mut self, g: usize) -> Self {
        self.cordoned.push(g);
        self
    }
    fn want(mut self, c: Code) -> Self {
        self.want = Some(c);
        self
    }
    /// The case's node alone in a State, with its tasks running.
    fn state(&self) -> State {
        let mut st = world(std::slice::from_ref(&self.node));
        allocate_on(&mut st, self.node.name(), &self.running);
        for &g in &self.cordoned {
            st.cordon(self.node.name(), g, true).expect("cordon");
        }
        st
    }
}

fn v100s() -> NodeBuilder {
    node("v100").cpu(8000).memory(16384).gpus(2, "V100-16GB")
}

fn h100_mig() -> NodeBuilder {
    node("h100").gpus(1, "H100-80GB").mig()
}

fn full_h100() -> NodeBuilder {
    node("h100").gpus(1, "H100-80GB").mig().layout("7g.80gb@0")
}

#[test]
fn fit() {
    let cases = vec![
        // CPU and memory come first, for every kind of task.
        case(
            "fits a CPU-only task on a CPU-only node",
            node("cpu"),
            task("t").cpu(1000),
        ),
        case(
            "fits a CPU-only task on a GPU node",
            v100s(),
            task("t").cpu(8000).memory(16384),
        ),
        case(
            "refuses more CPU than is left",
            v100s(),
            task("t").cpu(4001),
        )
        .running(running("old").cpu(4000))
        .want(Code::Cpu),
        case(
            "refuses more memory than is left",
            v100s(),
            task("t").memory(8193),
        )
        .running(running("old").memory(8192))
        .want(Code::Memory),
        case(
            "checks CPU before the GPUs",
            node("cpu").cpu(1000),
            task("t").cpu(2000).gpus(1),
        )
        .want(Code::Cpu),
        // GPUs.
        case(
            "refuses a share on a node without GPUs",
            node("cpu"),
            task("t").share(100),
        )
        .want(Code::NoGpu),
        case(
            "refuses whole GPUs on a node without GPUs",
            node("cpu"),
            task("t").gpus(1),
        )
        .want(Code::NoGpu),
        case(
            "refuses a model the task does not allow",
            v100s(),
            task("t").share(100).on(&["V100M32"]),
        )
        .want(Code::Model),
        case(
            "fits a model the task names by its trace name",
            v100s(),
            task("t").share(100).on(&["G2", "V100M16"]),
        ),
        case(
            "fits a share on a fully free GPU",
            v100s(),
            task("t").share(999),
        ),
        case(
            "fits a share in what a GPU has left",
            v100s(),
            task("t").share(500),
        )
        .running(running("a").share(0, 500))
        .running(running("b").share(1, 700)),
        case(
            "refuses a share larger than every GPU's room",
            v100s(),
            task("t").share(500),
        )
        .running(running("a").share(0, 501))
        .running(running("b").share(1, 700))
        .want(Code::Gpu),
        case(
            "fits whole GPUs on fully free GPUs",
            v100s(),
            task("t").gpus(2),
        ),
        case(
            "refuses a share on a cordoned GPU",
            v100s(),
            task("t").share(1),
        )
        .cordon(0)
        .cordon(1)
        .want(Code::Gpu),
        case(
            "does not count a cordoned GPU as free",
            v100s(),
            task("t").gpus(2),
        )
        .cordon(1)
        .want(Code::Gpu),
        case(
            "refuses more whole GPUs than the node has",
            v100s(),
            task("t").gpus(3),
        )
        .want(Code::Gpu),
        case(
            "does not count a shared GPU as a whole one",
            v100s(),
            task("t").gpus(2),
        )
        .running(running("a").share(1, 1))
        .want(Code::Gpu),
        // MIG.
        case(
            "refuses a share on a MIG GPU",
            h100_mig(),
            task("t").share(100),
        )
        .want(Code::MigOff),
        case(
            "refuses whole GPUs on a MIG GPU",
            h100_mig(),
            task("t").gpus(1),
        )
        .want(Code::MigOff),
        case(
            "refuses a MIG profile on a GPU with MIG off",
            node("a100").gpus(1, "A100-80GB"),
            task("t").mig_profile("1g.10gb"),
        )
        .want(Code::MigOff),
        case(
            "refuses a profile the model does not offer",
            h100_mig(),
            task("t").mig_profile("1g.18gb"),
        )
        .want(Code::Model),
        case(
            "fits a profile that can be created",
            h100_mig(),
            task("t").mig_profile("3g.40gb"),
        ),
        case(
            "fits a profile on a free instance",
            full_h100(),
            task("t").mig_profile("7g.80gb"),
        ),
        case(
            "refuses a profile with no free or creatable instance",
            full_h100(),
            task("t").mig_profile("1g.10gb"),
        )
        .running(running("big").instance(0, "7g.80gb@0"))
        .want(Code::Mig),
        case(
            "refuses a profile on a cordoned GPU",
            h100_mig(),
            task("t").mig_profile("1g.10gb"),
        )
        .cordon(0)
        .want(Code::Mig),
        case(
            "refuses a memory profile on a MIG GPU without room",
            full_h100(),
            task("t").gpu_memory(8192, 0.0),
        )
        .running(running("big").instance(0, "7g.80gb@0"))
        .want(Code::Mig),
        // Memory profiles.
        case(
            "fits a memory profile as a share",
            v100s(),
            task("t").gpu_memory(8192, 0.0),
        ),
        case(
            "fits a memory profile as a MIG instance",
            h100_mig(),
            task("t").gpu_memory(8192, 0.0),
        ),
        case(
            "refuses a memory profile larger than the GPU",
            v100s(),
            task("t").gpu_memory(16385, 0.0),
        )
        .want(Code::TooSmall),
        case(
            "refuses a memory profile larger than every MIG profile",
            h100_mig(),
            task("t").gpu_memory(81921, 0.0),
        )
        .want(Code::TooSmall),
        case(
            "refuses a memory profile on a GPU of unknown memory",
            node("g2").gpus(1, "G2"),
            task("t").gpu_memory(1024, 0.0),
        )
        .want(Code::TooSmall),
        case(
            "refuses a memory profile whose share is taken",
            v100s(),
            task("t").gpu_memory(8192, 0.0),
        )
        .running(running("a").share(0, 600))
        .running(running("b").share(1, 600))
        .want(Code::Gpu),
    ];
    for c in cases {
        let st = c.state();
        let got = Fit.filter(st.node(0), &request(&c.task));
        match (got, c.want) {
            (Ok(()), None) => {}
            (Err(why), Some(want)) => {
                assert_eq!(why.code, want, "{}", c.name);
                assert_eq!(why.filter, "fit", "{}", c.name);
            }
            (got, want) => panic!("{}: Filter = {got:?}, want {want:?}", c.name),
        }
    }
}

#[test]
fn fit_names_itself() {
    assert_eq!(Fit.name(), "fit");
}

#[test]
fn a_mig_only_memory_profile_takes_no_share_of_a_mig_capable_model() {
    // An A100 with MIG off: the share fits unless the request is MIG-only.
    let st = world(&[node("a100").gpus(1, "A100-80GB")]);
    let mut r = request(&task("t").gpu_memory(8192, 0.0));
    assert_eq!(Fit.filter(st.node(0), &r), Ok(()));
    r.set_mig_only(true);
    assert_eq!(
        Fit.filter(st.node(0), &r).map_err(|why| why.code),
        Err(Code::MigOff)
    );
    // A V100 cannot do MIG at all: MIG-only changes nothing there.
    let st = world(&[v100s()]);
    assert_eq!(Fit.filter(st.node(0), &r), Ok(()));
}

#[test]
fn explain_says_why_with_the_numbers() {
    let cases = [
        (
            "says a fitting task fits",
            case("", v100s(), task("t").share(100)),
            "fits",
        ),
        (
            "gives the CPU asked and free",
            case("", v100s(), task("t").cpu(6000)).running(running("old").cpu(3000)),
            "cpu: asks 6000m, 5000m free",
        ),
        (
            "gives the memory asked and free",
            case("", v100s(), task("t").memory(20000)),
            "memory: asks 20000 MiB, 16384 MiB free",
        ),
        (
            "says the node has no GPU",
            case("", node("cpu"), task("t").gpus(1)),
            "no GPU on the node",
        ),
        (
            "names the node's model and the allowed ones",
            case("", v100s(), task("t").gpus(1).on(&["V100M32", "G2"])),
            "gpu model: node has V100-16GB, task allows [V100-32GB G2]",
        ),
        (
            "says MIG mode does not match",
            case(
                "",
                node("h100").gpus(1, "H100-80GB").mig(),
                task("t").gpus(1),
            ),
            "gpu: MIG mode does not match the demand",
        ),
        (
            "gives the peak memory no share holds",
            case("", v100s(), task("t").gpu_memory(20000, 0.0)),
            "gpu memory: no profile or share of V100-16GB holds 20000 MiB",
        ),
        (
            "gives the GPUs asked and free",
            case("", v100s(), task("t").gpus(2)).running(running("old").share(0, 300)),
            "gpu: asks 2 GPU; 1 fully free GPUs, 1700 milli free",
        ),
    ];
    for (name, c, want) in cases {
        let st = c.state();
        assert_eq!(explain(st.node(0), &request(&c.task)), want, "{name}");
    }
}

#[test]
fn slices_for_lists_free_instances_before_new_ones() {
    let st = world(&[node("h100").gpus(1, "H100-80GB").mig().layout("1g.10gb@6")]);
    let g = &st.node(0).gpus()[0];
    let p = g.model().profile("1g.10gb").expect("a profile of the H100");
    let got: Vec<String> = slices_for(g, p).map(|pl| pl.to_string()).collect();
    assert!(
        got.len() >= 2 && got[0] == "1g.10gb@6",
        "slices_for = {got:?}; want the free 1g.10gb@6 first, then places to create one"
    );
    for pl in &got[1..] {
        assert_ne!(pl, "1g.10gb@6", "slices_for = {got:?} lists slice 6 twice");
        assert!(pl.starts_with("1g.10gb@"), "slices_for = {got:?}");
    }
}

#[test]
fn slices_for_agrees_with_free_placements() {
    // Over layouts with instances in use and free: the instances to create
    // are exactly what the model's free_placements offers.
    let mut st = world(&[node("h100")
        .gpus(1, "H100-80GB")
        .mig()
        .layout("1g.10gb@0,2g.20gb@2,1g.10gb@6")]);
    allocate_on(&mut st, "h100", &[running("a").instance(0, "1g.10gb@0")]);
    let g = &st.node(0).gpus()[0];
    for p in &g.model().profiles {
        let got: Vec<_> = slices_for(g, p).collect();
        let mut want: Vec<_> = g
            .slices()
            .iter()
            .filter(|s| s.is_free() && s.profile() == p.name)
            .map(|s| s.placement().clone())
            .collect();
        want.extend(
            g.model()
                .free_placements(&g.layout(), &p.name)
                .expect("valid"),
        );
        assert_eq!(got, want, "{}", p.name);
    }
    st.cordon("h100", 0, true).expect("cordon");
    let g = &st.node(0).gpus()[0];
    let p = g.model().profile("1g.10gb").expect("profile");
    assert_eq!(slices_for(g, p).count(), 0, "a cordoned GPU offers nothing");
}

#[test]
fn profile_on() {
    let st = world(&[
        node("h100").gpus(1, "H100-80GB").mig(),
        node("v100").gpus(1, "V100-16GB"),
    ]);
    let (h100, v100) = (&st.node(0).gpus()[0], &st.node(1).gpus()[0]);
    let cases = [
        (
            "names the profile asked for",
            request(&task("t").mig_profile("2g.20gb")),
            h100,
            "2g.20gb",
        ),
        (
            "names the profile a memory profile resolves to",
            request(&task("t").gpu_memory(15000, 0.0)),
            h100,
            "1g.20gb",
        ),
        (
            "names nothing on a GPU with MIG off",
            request(&task("t").mig_profile("2g.20gb")),
            v100,
            "",
        ),
        (
            "names nothing for a model the task refuses",
            request(&task("t").mig_profile("2g.20gb").on(&["A100-80GB"])),
            h100,
            "",
        ),
        (
            "names nothing for a share",
            request(&task("t").share(100)),
            h100,
            "",
        ),
    ];
    for (name, r, g, want) in cases {
        assert_eq!(r.profile_on(g).map_or("", |p| &*p.name), want, "{name}");
    }
}

#[test]
fn some_room_but_not_enough_says_gpu_whatever_the_last_gpu_said() {
    // GPU 0 is free, GPU 1 is in MIG mode: two whole GPUs do not fit, and
    // the reason is the missing room, not GPU 1's mode.
    let mut st = world(&[node("a100").gpus(2, "A100-80GB")]);
    st.set_mig("a100", 1, true).expect("set_mig");
    let why = Fit.filter(st.node(0), &request(&task("t").gpus(2)));
    assert_eq!(why.map_err(|w| w.code), Err(Code::Gpu));
    // With no room at all, the last GPU's reason stands.
    let why = Fit.filter(st.node(0), &request(&task("t").gpus(1).on(&["H100-80GB"])));
    assert_eq!(why.map_err(|w| w.code), Err(Code::Model));
}
