//! validate_test.go: the values and references the reader refuses.

use super::*;
use crate::gpu::DEFAULT_HEADROOM;
use crate::numfmt::format_fixed;

fn known_profiles() -> String {
    crate::profiles::names().join(", ")
}

fn known_models() -> String {
    crate::scenario::convert::known_models().join(", ")
}

/// The Go build's text at its headroom, 5 % (its test pins "46930 MiB
/// each (44695 MiB + 5% headroom)"), worked out with the engine's own
/// headroom so that this test follows crate::gpu.
fn no_node_holds_pretrain() -> String {
    format!(
        "t.yaml:29: workloads[1].profile: pretrain-13b-worker needs 1 GPU with {} MiB each \
         (44695 MiB + {}% headroom) on one node; no node group has that",
        format_fixed(44695.0 * (1.0 + DEFAULT_HEADROOM), 0),
        format_fixed(DEFAULT_HEADROOM * 100.0, 0)
    )
}

#[test]
fn parse_refuses_bad_values() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "refuses a zero horizon",
            "duration: 24h",
            "duration: 0s",
            "t.yaml:2: duration: 0s must be more than 0 and at most 87600h",
        ),
        (
            "refuses a horizon past ten years",
            "duration: 24h",
            "duration: 100000h",
            "t.yaml:2: duration: 100000h must be more than 0 and at most 87600h",
        ),
        (
            "refuses a negative production reserve",
            "duration: 24h",
            "duration: 24h\nproduction_reserve_gpus: -1",
            "t.yaml:3: production_reserve_gpus: -1 must be between 0 and the cluster's 16 GPUs",
        ),
        (
            "refuses a production reserve above the cluster",
            "duration: 24h",
            "duration: 24h\nproduction_reserve_gpus: 17",
            "t.yaml:3: production_reserve_gpus: 17 must be between 0 and the cluster's 16 GPUs",
        ),
        (
            "refuses a fractional production reserve",
            "duration: 24h",
            "duration: 24h\nproduction_reserve_gpus: 1.5",
            "t.yaml:3: production_reserve_gpus: \"1.5\" is not a whole number",
        ),
        (
            "refuses a group of no nodes",
            "    count: 2",
            "    count: 0",
            "t.yaml:5: nodes[0].count: 0 must be ≥ 1 and ≤ 100000",
        ),
        (
            "refuses a negative GPU count",
            "    gpus: 8",
            "    gpus: -1",
            "t.yaml:7: nodes[0].gpus: -1 must be ≥ 1",
        ),
        (
            "refuses more GPUs per node than any board has",
            "    gpus: 8",
            "    gpus: 17",
            "t.yaml:7: nodes[0].gpus: 17 must be ≤ 16",
        ),
        (
            "refuses an unknown GPU model and lists the known ones",
            "    gpu: H100-80GB",
            "    gpu: H100",
            &[
                "t.yaml:6: nodes[0].gpu: unknown GPU model \"H100\" (known: ",
                &known_models(),
                ")",
            ]
            .concat(),
        ),
        (
            "refuses MIG on a GPU without it",
            "    gpu: H100-80GB",
            "    gpu: V100-32GB",
            "t.yaml:8: nodes[0].mig: V100-32GB does not support MIG",
        ),
        (
            "refuses zero CPU",
            "    cpu: 192",
            "    cpu: 0",
            "t.yaml:9: nodes[0].cpu: 0m must be more than 0",
        ),
        (
            "refuses zero memory",
            "    memory: 2Ti",
            "    memory: 0Gi",
            "t.yaml:10: nodes[0].memory: 0 MiB must be more than 0",
        ),
        (
            "refuses an unknown tier",
            "    leaves: [leaf-a, leaf-b]",
            "    leaves: [leaf-a, leaf-b]\n    tier: cheap",
            "t.yaml:12: nodes[0].tier: unknown capacity tier \"cheap\" (known: reserved, on-demand, spot)",
        ),
        (
            "refuses an unknown NVLink shape",
            "    leaves: [leaf-a, leaf-b]",
            "    leaves: [leaf-a, leaf-b]\n    nvlink: some",
            "t.yaml:12: nodes[0].nvlink: \"some\" must be none, all or pairs",
        ),
        (
            "refuses a leaf that is not a label value",
            "    leaves: [leaf-a, leaf-b]",
            "    leaves: [leaf-a, leaf a]",
            "t.yaml:11: nodes[0].leaves[1]: \"leaf a\" is not a valid label value (letters, digits, '-', '_', '.'; at most 63)",
        ),
        (
            "refuses a leaf listed twice",
            "    leaves: [leaf-a, leaf-b]",
            "    leaves: [leaf-a, leaf-a]",
            "t.yaml:11: nodes[0].leaves[1]: \"leaf-a\" is listed twice",
        ),
        (
            "refuses a spine that is not a label value",
            "    leaves: [leaf-a, leaf-b]",
            "    leaves: [leaf-a]\n    spine: -bad",
            "t.yaml:12: nodes[0].spine: \"-bad\" is not a valid label value (letters, digits, '-', '_', '.'; at most 63)",
        ),
        (
            "refuses a group name with capitals",
            "  - group: h100",
            "  - group: H100",
            "t.yaml:4: nodes[0].group: \"H100\" must be lowercase letters, digits and '-', start with a letter, not end with '-', and be at most 40 long",
        ),
        (
            "refuses an empty group name",
            "  - group: h100",
            "  - group: \"\"",
            "t.yaml:4: nodes[0].group: missing",
        ),
        (
            "refuses a burst below the guarantee",
            "    burst_gpus: 16",
            "    burst_gpus: 4",
            "t.yaml:15: teams[0].burst_gpus: 4 is below guaranteed_gpus 8",
        ),
        (
            "refuses a guarantee above the cluster",
            "    guaranteed_gpus: 8",
            "    guaranteed_gpus: 20",
            "t.yaml:14: teams[0].guaranteed_gpus: 20 is more than the cluster's 16 GPUs",
        ),
        (
            "refuses guarantees that add up to more than the cluster",
            "    guaranteed_gpus: 4",
            "    guaranteed_gpus: 9",
            "t.yaml:12: teams: guaranteed_gpus add up to 17, more than the cluster's 16 GPUs",
        ),
        (
            "refuses a negative guarantee",
            "    guaranteed_gpus: 8",
            "    guaranteed_gpus: -1",
            "t.yaml:14: teams[0].guaranteed_gpus: -1 must be ≥ 0",
        ),
        (
            "refuses a burst above the cluster",
            "    burst_gpus: 16",
            "    burst_gpus: 17",
            "t.yaml:15: teams[0].burst_gpus: 17 is more than the cluster's 16 GPUs",
        ),
        (
            "refuses a zero weight",
            "    burst_gpus: 16",
            "    burst_gpus: 16\n    weight: 0",
            "t.yaml:16: teams[0].weight: 0 must be a number more than 0",
        ),
        (
            "refuses an unknown class in a team",
            "    burst_gpus: 16",
            "    burst_gpus: 16\n    classes: [production, urgent]",
            "t.yaml:16: teams[0].classes[1]: unknown priority class \"urgent\" (known: best-effort, batch, production)",
        ),
        (
            "refuses a team with no classes",
            "    burst_gpus: 16",
            "    burst_gpus: 16\n    classes: []",
            "t.yaml:16: teams[0].classes: empty: allow at least one of production, batch, best-effort",
        ),
        (
            "refuses a class listed twice",
            "    burst_gpus: 16",
            "    burst_gpus: 16\n    classes: [batch, batch]",
            "t.yaml:16: teams[0].classes[1]: batch is listed twice",
        ),
        (
            "refuses a team name used twice",
            "  - name: research",
            "  - name: search",
            "t.yaml:16: teams[1].name: \"search\" is used twice",
        ),
        (
            "refuses a workload of a team that does not exist",
            "    team: search",
            "    team: ads",
            "t.yaml:20: workloads[0].team: \"ads\" is not a team (teams: search, research)",
        ),
        (
            "refuses a workload without a team",
            "    team: search\n",
            "",
            "t.yaml:19: workloads[0].team: missing: the team that owns the workload",
        ),
        (
            "refuses an unknown class",
            "    class: production",
            "    class: urgent",
            "t.yaml:21: workloads[0].class: unknown priority class \"urgent\" (known: best-effort, batch, production)",
        ),
        (
            "refuses a workload without a class",
            "    class: production\n",
            "",
            "t.yaml:19: workloads[0].class: missing: production, batch or best-effort",
        ),
        (
            "refuses a class the team may not use",
            "    guaranteed_gpus: 4",
            "    guaranteed_gpus: 4\n    classes: [best-effort]",
            "t.yaml:29: workloads[1].class: team research may not run batch work (allowed: best-effort)",
        ),
        (
            "refuses an unknown profile and lists the known ones",
            "    profile: llm-7b-bf16",
            "    profile: llm-9b",
            &[
                "t.yaml:22: workloads[0].profile: unknown profile \"llm-9b\" (known: ",
                &known_profiles(),
                ")",
            ]
            .concat(),
        ),
        (
            "refuses both profile and mix",
            "    profile: llm-7b-bf16",
            "    profile: llm-7b-bf16\n    mix: {embed-335m: 1}",
            "t.yaml:23: workloads[0].mix: give profile or mix, not both",
        ),
        (
            "refuses an unknown profile in a mix",
            "    profile: llm-7b-bf16",
            "    mix: {embed-335m: 1, llm-9b: 2}",
            &[
                "t.yaml:22: workloads[0].mix.llm-9b: unknown profile \"llm-9b\" (known: ",
                &known_profiles(),
                ")",
            ]
            .concat(),
        ),
        (
            "refuses a mix of inference and training",
            "    profile: llm-7b-bf16",
            "    mix: {embed-335m: 1, lora-ft-7b: 2}",
            "t.yaml:22: workloads[0].mix.lora-ft-7b: lora-ft-7b is training but embed-335m is inference; a workload's profiles must be of one kind",
        ),
        (
            "refuses a zero weight in a mix",
            "    profile: llm-7b-bf16",
            "    mix: {embed-335m: 0}",
            "t.yaml:22: workloads[0].mix.embed-335m: weight 0 must be a number more than 0",
        ),
        (
            "refuses a workload without a profile",
            "    profile: llm-7b-bf16\n",
            "",
            "t.yaml:19: workloads[0].profile: missing: a profile, or a mix of profiles with weights",
        ),
        (
            "refuses an unknown arrival process",
            "    arrival: {process: poisson, rate_per_hour: 30}",
            "    arrival: {process: lumpy}",
            "t.yaml:23: workloads[0].arrival.process: unknown process \"lumpy\" (known: poisson, trace, fixed)",
        ),
        (
            "refuses an arrival without a process",
            "    arrival: {process: poisson, rate_per_hour: 30}",
            "    arrival: {rate_per_hour: 30}",
            "t.yaml:23: workloads[0].arrival.process: missing: poisson, trace or fixed",
        ),
        (
            "refuses a workload without arrivals",
            "    arrival: {process: poisson, rate_per_hour: 30}\n",
            "",
            "t.yaml:19: workloads[0].arrival: missing: how jobs arrive: {process: poisson, rate_per_hour: …}, trace or fixed",
        ),
        (
            "refuses a trace file on poisson arrivals",
            "    arrival: {process: poisson, rate_per_hour: 30}",
            "    arrival: {process: poisson, rate_per_hour: 30, file: x.csv}",
            "t.yaml:23: workloads[0].arrival.file: only for process: trace (this one is poisson)",
        ),
        (
            "refuses a zero rate",
            "    arrival: {process: poisson, rate_per_hour: 30}",
            "    arrival: {process: poisson, rate_per_hour: 0}",
            "t.yaml:23: workloads[0].arrival.rate_per_hour: 0 must be a number more than 0",
        ),
        (
            "refuses an infinite rate",
            "    arrival: {process: poisson, rate_per_hour: 30}",
            "    arrival: {process: poisson, rate_per_hour: .inf}",
            "t.yaml:23: workloads[0].arrival.rate_per_hour: +Inf must be a number more than 0",
        ),
        (
            "refuses a rate that would generate too many jobs",
            "    arrival: {process: poisson, rate_per_hour: 30}",
            "    arrival: {process: poisson, rate_per_hour: 1e9}",
            "t.yaml:23: workloads[0].arrival.rate_per_hour: 1e+09 per hour over 24h is 2.4e+10 jobs, more than 1000000",
        ),
        (
            "refuses trace arrivals without a file",
            "    arrival: {process: poisson, rate_per_hour: 30}",
            "    arrival: {process: trace}",
            "t.yaml:23: workloads[0].arrival.file: missing: the Alibaba pod list (CSV) whose creation times give the arrivals",
        ),
        (
            "refuses a zero time scale",
            "    arrival: {process: poisson, rate_per_hour: 30}",
            "    arrival: {process: trace, file: x.csv, time_scale: 0}",
            "t.yaml:23: workloads[0].arrival.time_scale: 0 must be a number more than 0",
        ),
        (
            "refuses a time scale on poisson arrivals",
            "    arrival: {process: poisson, rate_per_hour: 30}",
            "    arrival: {process: poisson, rate_per_hour: 3, time_scale: 2}",
            "t.yaml:23: workloads[0].arrival.time_scale: only for process: trace (this one is poisson)",
        ),
        (
            "refuses a fixed arrival at the horizon",
            "    arrival: {process: fixed, at: [0s, 10m]}",
            "    arrival: {process: fixed, at: [0s, 24h]}",
            "t.yaml:30: workloads[1].arrival.at[1]: 24h must be ≥ 0 and before the horizon 24h",
        ),
        (
            "refuses fixed arrivals without times",
            "    arrival: {process: fixed, at: [0s, 10m]}",
            "    arrival: {process: fixed, at: []}",
            "t.yaml:30: workloads[1].arrival.at: missing: the arrival times, such as [0s, 10m]",
        ),
        (
            "refuses a negative fixed arrival",
            "    arrival: {process: fixed, at: [0s, 10m]}",
            "    arrival: {process: fixed, at: [-1s]}",
            "t.yaml:30: workloads[1].arrival.at[0]: -1s must be ≥ 0 and before the horizon 24h",
        ),
        (
            "refuses a rate on fixed arrivals",
            "    arrival: {process: fixed, at: [0s, 10m]}",
            "    arrival: {process: fixed, rate_per_hour: 3, at: [0s]}",
            "t.yaml:30: workloads[1].arrival.rate_per_hour: only for process: poisson (this one is fixed)",
        ),
        (
            "refuses an unknown distribution",
            "    duration: {dist: exponential, mean: 2h}",
            "    duration: {dist: gamma, mean: 2h}",
            "t.yaml:24: workloads[0].duration.dist: unknown distribution \"gamma\" (known: exponential, lognormal, fixed, uniform)",
        ),
        (
            "refuses a distribution without its name",
            "    duration: {dist: exponential, mean: 2h}",
            "    duration: {mean: 2h}",
            "t.yaml:24: workloads[0].duration.dist: missing: exponential, lognormal, fixed or uniform",
        ),
        (
            "refuses a workload without run times",
            "    duration: {dist: exponential, mean: 2h}\n",
            "",
            "t.yaml:19: workloads[0].duration: missing: a run-time distribution, such as {dist: exponential, mean: 2h}",
        ),
        (
            "refuses a field the distribution does not use",
            "    duration: {dist: exponential, mean: 2h}",
            "    duration: {dist: exponential, mean: 2h, sigma: 1}",
            "t.yaml:24: workloads[0].duration.sigma: not used by dist: exponential (it takes mean)",
        ),
        (
            "refuses a lognormal without sigma",
            "    duration: {dist: exponential, mean: 2h}",
            "    duration: {dist: lognormal, mean: 2h}",
            "t.yaml:24: workloads[0].duration.sigma: 0 must be more than 0 and at most 10",
        ),
        (
            "refuses a negative mean",
            "    duration: {dist: exponential, mean: 2h}",
            "    duration: {dist: exponential, mean: -2h}",
            "t.yaml:24: workloads[0].duration.mean: -2h must be more than 0 and at most 87600h",
        ),
        (
            "refuses a uniform with max below min",
            "    duration: {dist: exponential, mean: 2h}",
            "    duration: {dist: uniform, min: 2h, max: 1h}",
            "t.yaml:24: workloads[0].duration.max: 1h must be more than min 2h",
        ),
        (
            "refuses a uniform with a negative min",
            "    duration: {dist: exponential, mean: 2h}",
            "    duration: {dist: uniform, min: -2h, max: 1h}",
            "t.yaml:24: workloads[0].duration.min: -2h must be ≥ 0",
        ),
        (
            "refuses a fixed run time without a value",
            "    duration: {dist: fixed, value: 1h}",
            "    duration: {dist: fixed}",
            "t.yaml:31: workloads[1].duration.value: 0s must be more than 0 and at most 87600h",
        ),
        (
            "refuses zero replicas",
            "    replicas: 2",
            "    replicas: 0",
            "t.yaml:25: workloads[0].replicas: 0 must be ≥ 1 and ≤ 1000",
        ),
        (
            "refuses a gang for inference",
            "    replicas: 2",
            "    replicas: 2\n    gang: {sizes: [2]}",
            "t.yaml:26: workloads[0].gang: only for training workloads; inference runs replicas tasks per job",
        ),
        (
            "refuses checkpoints for inference",
            "    replicas: 2",
            "    replicas: 2\n    checkpoint_every: 1h",
            "t.yaml:26: workloads[0].checkpoint_every: only for training workloads",
        ),
        (
            "refuses replicas for training",
            "    checkpoint_every: 30m",
            "    checkpoint_every: 30m\n    replicas: 1",
            "t.yaml:34: workloads[1].replicas: only for inference workloads; training runs gang.sizes tasks per job",
        ),
        (
            "refuses a gang larger than the GPUs that can run it",
            "    gang: {sizes: [4, 8], weights: [0.5, 0.5]}",
            "    gang: {sizes: [4, 32], weights: [0.5, 0.5]}",
            "t.yaml:32: workloads[1].gang.sizes[1]: a gang of 32 tasks × 1 GPU needs 32 GPUs; the cluster has 16 that can run pretrain-13b-worker",
        ),
        (
            "refuses a gang of zero tasks",
            "    gang: {sizes: [4, 8], weights: [0.5, 0.5]}",
            "    gang: {sizes: [4, 0], weights: [0.5, 0.5]}",
            "t.yaml:32: workloads[1].gang.sizes[1]: 0 must be ≥ 1 and ≤ 4096",
        ),
        (
            "refuses fewer gang weights than sizes",
            "    gang: {sizes: [4, 8], weights: [0.5, 0.5]}",
            "    gang: {sizes: [4, 8], weights: [0.5]}",
            "t.yaml:32: workloads[1].gang.weights: 1 given for 2 sizes; give one weight per size",
        ),
        (
            "refuses a negative gang weight",
            "    gang: {sizes: [4, 8], weights: [0.5, 0.5]}",
            "    gang: {sizes: [4, 8], weights: [0.5, -1]}",
            "t.yaml:32: workloads[1].gang.weights[1]: -1 must be a number more than 0",
        ),
        (
            "refuses an empty gang",
            "    gang: {sizes: [4, 8], weights: [0.5, 0.5]}",
            "    gang: {sizes: []}",
            "t.yaml:32: workloads[1].gang.sizes: missing: tasks per job, such as [8, 16]",
        ),
        (
            "refuses a negative checkpoint interval",
            "    checkpoint_every: 30m",
            "    checkpoint_every: -30m",
            "t.yaml:33: workloads[1].checkpoint_every: -30m must be ≥ 0 and at most 87600h",
        ),
        (
            "refuses a workload name used twice",
            "  - name: train",
            "  - name: chat",
            "t.yaml:26: workloads[1].name: \"chat\" is used twice",
        ),
        (
            "refuses a workload name that cannot be a job id",
            "  - name: train",
            "  - name: Train_1",
            "t.yaml:26: workloads[1].name: \"Train_1\" must be lowercase letters, digits and '-', start with a letter, not end with '-', and be at most 40 long",
        ),
        (
            "refuses a profile no node can hold",
            "    gpu: H100-80GB",
            "    gpu: A100-40GB",
            &no_node_holds_pretrain(),
        ),
    ];
    for (name, old, new, want) in cases {
        println!("{name}");
        want_error(parse(edit(BASE, old, new), "t.yaml"), want);
    }
}
