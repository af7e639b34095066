//! The one place that holds GPU facts. Everything else in the module is
//! arithmetic over these tables.
//!
//! Sources:
//!   - MIG geometry (profiles, slices, placements, SMs, max per GPU): NVIDIA
//!     MIG User Guide, driver 580 series, "Supported MIG Profiles", and
//!     `nvidia-smi mig -lgip` / `-lgipp` transcripts for A100-80GB and
//!     H100-80GB, as summarised in shared/reference/mig-and-gpu-operator.md.
//!   - PCI device ids of the MIG GPUs: the same reference (the GPU
//!     Operator's mig-parted `device-filter` writes them with the NVIDIA
//!     vendor id appended, e.g. "0x233010DE").
//!   - GFD product labels (`nvidia.com/gpu.product`): the NVML product name
//!     with spaces replaced by '-', as GPU Feature Discovery writes it.
//!   - Whole-card memory and SM counts: NVIDIA's public data sheets.
//!   - Alibaba trace names (V100M16, V100M32, G2, G3, ...): the `model`
//!     column of shared/data/alibaba-gpu-v2023/openb_node_list_*.csv.
//!
//! The tables are `static` data; the models are built from them once, on
//! first use, and never change after.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use super::{Model, Profile};

/// Turns the nominal GB in a product or profile name into MiB. The driver
/// reports less than the nominal figure, and an instance's real size is
/// what a task can use: where we have an `nvidia-smi mig -lgip` transcript
/// the profile memory is what it reports (`reported_gib`); elsewhere the
/// nominal figure stands and `DEFAULT_HEADROOM` has to absorb the gap.
const MIB_PER_GB: i64 = 1024;

/// The instance memory `nvidia-smi mig -lgip` reports, per model, in
/// `MIG_KINDS` order.
///   - H200-141GB: measured on an H200 (driver 580.159.04), 2026-11-29;
///     testdata/h200-nvidia-smi-mig.txt is the transcript (16.00 GiB for a
///     "1g.18gb": the nominal figure over-promises by 11 %).
///   - H100-80GB: a public transcript (jbarrow.ai/field_notes/nvidia-mig,
///     updated 2026-06-11).
///   - A100: no transcript found; nominal sizes.
const REPORTED_GIB_H200: [f64; 7] = [16.00, 16.00, 32.50, 32.50, 69.75, 69.75, 140.00];
const REPORTED_GIB_H100: [f64; 7] = [9.75, 9.75, 19.62, 19.62, 39.50, 39.50, 79.25];

/// One row of the MIG guide's profile table: a profile shape that every
/// MIG GPU in the catalog offers under its own name (1g.10gb on an
/// H100-80GB is 1g.18gb on an H200-141GB).
struct MigKind {
    /// Compute slices, of 7.
    compute: i32,
    /// Memory slices, of 8; also the placement width.
    memory: i32,
    /// Allowed start memory-slice indexes.
    starts: &'static [i32],
    /// The "+me" variant, which owns the media engines.
    media_ext: bool,
    max_per_gpu: i32,
    /// SMs of the instance on an A100 (GA100).
    sms_ga100: i32,
    /// SMs of the instance on an H100 or H200 (GH100).
    sms_gh100: i32,
}

/// The profile shapes small to large (memory slices, then compute slices);
/// `mig_profiles` pairs each model's names with these rows in this order.
const MIG_KINDS: [MigKind; 7] = [
    // 1g
    MigKind {
        compute: 1,
        memory: 1,
        starts: &[0, 1, 2, 3, 4, 5, 6],
        media_ext: false,
        max_per_gpu: 7,
        sms_ga100: 14,
        sms_gh100: 16,
    },
    // 1g+me
    MigKind {
        compute: 1,
        memory: 1,
        starts: &[0, 1, 2, 3, 4, 5, 6],
        media_ext: true,
        max_per_gpu: 1,
        sms_ga100: 14,
        sms_gh100: 16,
    },
    // 1g with 2/8 memory
    MigKind {
        compute: 1,
        memory: 2,
        starts: &[0, 2, 4, 6],
        media_ext: false,
        max_per_gpu: 4,
        sms_ga100: 14,
        sms_gh100: 26,
    },
    // 2g
    MigKind {
        compute: 2,
        memory: 2,
        starts: &[0, 2, 4],
        media_ext: false,
        max_per_gpu: 3,
        sms_ga100: 28,
        sms_gh100: 32,
    },
    // 3g
    MigKind {
        compute: 3,
        memory: 4,
        starts: &[0, 4],
        media_ext: false,
        max_per_gpu: 2,
        sms_ga100: 42,
        sms_gh100: 60,
    },
    // 4g
    MigKind {
        compute: 4,
        memory: 4,
        starts: &[0],
        media_ext: false,
        max_per_gpu: 1,
        sms_ga100: 56,
        sms_gh100: 64,
    },
    // 7g
    MigKind {
        compute: 7,
        memory: 8,
        starts: &[0],
        media_ext: false,
        max_per_gpu: 1,
        sms_ga100: 98,
        sms_gh100: 132,
    },
];

/// Selects the SM column of `MIG_KINDS`.
#[derive(Clone, Copy, PartialEq)]
enum Arch {
    Ga100,
    Gh100,
}

const MIG_SOURCE: &str = "NVIDIA MIG User Guide r580 (Supported MIG Profiles); nvidia-smi mig -lgip/-lgipp \
     transcripts for A100-80GB and H100-80GB; profile memory is the nominal GB in the name x 1024 MiB";
const SPEC_SOURCE: &str = "NVIDIA data sheet (memory, SMs); not MIG-capable";
const ALI_TRACE_ONLY: &str = "Alibaba GPU 2023 trace (cluster-trace-gpu-v2023); the model is undisclosed, so memory and SMs are unknown";
const H200_PLACEMENT: &str = "; H200 profiles, memory and placements from nvidia-smi mig -lgip/-lgipp on an H200 (testdata/h200-nvidia-smi-mig.txt)";

/// The MIG profile names of each MIG model, in `MIG_KINDS` order.
const A100_40GB_PROFILES: [&str; 7] = [
    "1g.5gb",
    "1g.5gb+me",
    "1g.10gb",
    "2g.10gb",
    "3g.20gb",
    "4g.20gb",
    "7g.40gb",
];
const A100_80GB_PROFILES: [&str; 7] = [
    "1g.10gb",
    "1g.10gb+me",
    "1g.20gb",
    "2g.20gb",
    "3g.40gb",
    "4g.40gb",
    "7g.80gb",
];
const H100_80GB_PROFILES: [&str; 7] = A100_80GB_PROFILES;
const H200_141GB_PROFILES: [&str; 7] = [
    "1g.18gb",
    "1g.18gb+me",
    "1g.35gb",
    "2g.35gb",
    "3g.71gb",
    "4g.71gb",
    "7g.141gb",
];

/// Every profile name of every catalog model, so that a parsed placement
/// can borrow the catalog's `'static` name.
const ALL_PROFILE_NAMES: [&[&str; 7]; 4] = [
    &A100_40GB_PROFILES,
    &A100_80GB_PROFILES,
    &H100_80GB_PROFILES,
    &H200_141GB_PROFILES,
];

/// The catalog's own `'static` spelling of a profile name, if a catalog
/// model has a profile of that name.
pub(crate) fn static_profile_name(name: &str) -> Option<&'static str> {
    ALL_PROFILE_NAMES
        .iter()
        .flat_map(|names| names.iter())
        .find(|n| **n == name)
        .copied()
}

fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

/// Every GPU model Partita knows, in the order `catalog()` returns them.
/// `lookup` accepts the name and every alias, case-insensitively.
fn build_catalog() -> Vec<Model> {
    vec![
        Model {
            name: "A100-40GB".into(),
            aliases: strings(&["NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"]),
            memory_mib: 40 * MIB_PER_GB,
            sms: 108,
            pci_device_ids: strings(&["0x20B0", "0x20B1"]),
            mig: true,
            profiles: mig_profiles(Arch::Ga100, None, &A100_40GB_PROFILES),
            known: true,
            source: MIG_SOURCE.into(),
        },
        Model {
            name: "A100-80GB".into(),
            aliases: strings(&["NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"]),
            memory_mib: 80 * MIB_PER_GB,
            sms: 108,
            pci_device_ids: strings(&["0x20B2", "0x20B5"]),
            mig: true,
            profiles: mig_profiles(Arch::Ga100, None, &A100_80GB_PROFILES),
            known: true,
            source: MIG_SOURCE.into(),
        },
        // SMs are the SXM5 card's; the PCIe card (0x2331) has 114, so its
        // MIG instances have fewer SMs than the table says.
        Model {
            name: "H100-80GB".into(),
            aliases: strings(&["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"]),
            memory_mib: 80 * MIB_PER_GB,
            sms: 132,
            pci_device_ids: strings(&["0x2330", "0x2331"]),
            mig: true,
            profiles: mig_profiles(Arch::Gh100, Some(&REPORTED_GIB_H100), &H100_80GB_PROFILES),
            known: true,
            source: MIG_SOURCE.into(),
        },
        // Memory and placements as an H200 reports them (143771 MiB,
        // device id 0x2335; testdata/h200-nvidia-smi-mig.txt).
        Model {
            name: "H200-141GB".into(),
            aliases: strings(&["NVIDIA-H200", "NVIDIA-H200-NVL", "H200"]),
            memory_mib: 143771,
            sms: 132,
            pci_device_ids: strings(&["0x2335", "0x233B"]),
            mig: true,
            profiles: mig_profiles(Arch::Gh100, Some(&REPORTED_GIB_H200), &H200_141GB_PROFILES),
            known: true,
            source: format!("{MIG_SOURCE}{H200_PLACEMENT}"),
        },
        spec_model("L4", &["NVIDIA-L4"], 24 * MIB_PER_GB, 58),
        spec_model("L40S", &["NVIDIA-L40S"], 48 * MIB_PER_GB, 142),
        spec_model("A10", &["NVIDIA-A10"], 24 * MIB_PER_GB, 72),
        spec_model("T4", &["Tesla-T4"], 16 * MIB_PER_GB, 40),
        spec_model(
            "V100-16GB",
            &["V100M16", "Tesla-V100-SXM2-16GB", "Tesla-V100-PCIE-16GB"],
            16 * MIB_PER_GB,
            80,
        ),
        spec_model(
            "V100-32GB",
            &["V100M32", "Tesla-V100-SXM2-32GB", "Tesla-V100-PCIE-32GB"],
            32 * MIB_PER_GB,
            80,
        ),
        // The trace says only "P100"; the 16 GB card is the common one (a
        // 12 GB PCIe card exists too).
        spec_model(
            "P100",
            &["Tesla-P100-SXM2-16GB", "Tesla-P100-PCIE-16GB"],
            16 * MIB_PER_GB,
            56,
        ),
        trace_only_model("G2"),
        trace_only_model("G3"),
    ]
}

/// A model known from its data sheet, without MIG.
fn spec_model(name: &str, aliases: &[&str], memory_mib: i64, sms: i32) -> Model {
    Model {
        name: name.into(),
        aliases: strings(aliases),
        memory_mib,
        sms,
        known: true,
        source: SPEC_SOURCE.into(),
        ..Model::default()
    }
}

/// A model the Alibaba trace names without saying what it is.
fn trace_only_model(name: &str) -> Model {
    Model {
        name: name.into(),
        known: true,
        source: ALI_TRACE_ONLY.into(),
        ..Model::default()
    }
}

/// A model's profiles from its names, one per `MIG_KINDS` row in that
/// order, with the memory the driver reports where known.
fn mig_profiles(
    arch: Arch,
    reported_gib: Option<&[f64; 7]>,
    names: &[&'static str; 7],
) -> Vec<Profile> {
    MIG_KINDS
        .iter()
        .zip(names)
        .enumerate()
        .map(|(i, (k, &name))| Profile {
            name: Cow::Borrowed(name),
            compute: k.compute,
            memory: k.memory,
            starts: Cow::Borrowed(k.starts),
            // Truncated as Go's int64(float64) truncates.
            memory_mib: match reported_gib {
                Some(gib) => (gib[i] * MIB_PER_GB as f64) as i64,
                None => nominal_mib(name),
            },
            sms: if arch == Arch::Gh100 {
                k.sms_gh100
            } else {
                k.sms_ga100
            },
            media_ext: k.media_ext,
            max_per_gpu: k.max_per_gpu,
        })
        .collect()
}

/// The memory in a profile name: "3g.40gb+me" is 40 GB. The names are the
/// static tables above, so a name without one is a programming error
/// (caught by the tests, which build the catalog).
fn nominal_mib(name: &str) -> i64 {
    let gb = name
        .split_once('.')
        .and_then(|(_, rest)| rest.split_once("gb"))
        .and_then(|(gb, _)| gb.parse::<i64>().ok())
        .filter(|gb| *gb > 0);
    match gb {
        Some(gb) => gb * MIB_PER_GB,
        None => panic!("gpu: profile name {name:?} has no <n>gb memory"),
    }
}

/// The catalog's models, built once.
pub(crate) static CATALOG: LazyLock<Vec<Model>> = LazyLock::new(build_catalog);

/// The catalog's positions by exact and lower-cased name and alias, so that
/// a lookup by canonical name costs no allocation. Lookups only: never
/// iterated where the order could matter.
pub(crate) static BY_NAME: LazyLock<BTreeMap<String, usize>> = LazyLock::new(|| {
    let mut idx: BTreeMap<String, usize> = BTreeMap::new();
    for (i, m) in CATALOG.iter().enumerate() {
        for n in std::iter::once(&m.name).chain(&m.aliases) {
            for key in [n.clone(), go_to_lower(n)] {
                if let Some(&other) = idx.get(&key)
                    && other != i
                {
                    panic!(
                        "gpu: name {key:?} belongs to both {} and {}",
                        CATALOG[other].name, m.name
                    );
                }
                idx.insert(key, i);
            }
        }
    }
    idx
});

/// Go's `strings.ToLower`: each character's simple lower-case mapping,
/// which is the first character of its full one. (Rust's
/// `str::to_lowercase` uses the full mappings: two characters for U+0130,
/// and a final sigma by context.)
pub(crate) fn go_to_lower(s: &str) -> String {
    if s.is_ascii() {
        return s.to_ascii_lowercase();
    }
    s.chars()
        .map(|c| c.to_lowercase().next().unwrap_or(c))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gpu::tests::MIG_MODELS;
    use crate::gpu::{catalog, lookup};

    /// One row of the profile table of shared/reference/mig-and-gpu-operator.md,
    /// typed in again here so that a slip in the tables above shows up as a
    /// difference.
    pub(crate) struct ReferenceKind {
        /// The profile's name on A100-40GB, A100-80GB, H100-80GB, H200-141GB.
        pub(crate) names: [&'static str; 4],
        pub(crate) compute: i32,
        pub(crate) width: i32,
        pub(crate) starts: &'static [i32],
        pub(crate) max_per_gpu: i32,
        sms_a100: i32,
        sms_gh100: i32,
        pub(crate) media_ext: bool,
    }

    pub(crate) const REFERENCE_KINDS: [ReferenceKind; 7] = [
        ReferenceKind {
            names: ["1g.5gb", "1g.10gb", "1g.10gb", "1g.18gb"],
            compute: 1,
            width: 1,
            starts: &[0, 1, 2, 3, 4, 5, 6],
            max_per_gpu: 7,
            sms_a100: 14,
            sms_gh100: 16,
            media_ext: false,
        },
        ReferenceKind {
            names: ["1g.5gb+me", "1g.10gb+me", "1g.10gb+me", "1g.18gb+me"],
            compute: 1,
            width: 1,
            starts: &[0, 1, 2, 3, 4, 5, 6],
            max_per_gpu: 1,
            sms_a100: 14,
            sms_gh100: 16,
            media_ext: true,
        },
        ReferenceKind {
            names: ["1g.10gb", "1g.20gb", "1g.20gb", "1g.35gb"],
            compute: 1,
            width: 2,
            starts: &[0, 2, 4, 6],
            max_per_gpu: 4,
            sms_a100: 14,
            sms_gh100: 26,
            media_ext: false,
        },
        ReferenceKind {
            names: ["2g.10gb", "2g.20gb", "2g.20gb", "2g.35gb"],
            compute: 2,
            width: 2,
            starts: &[0, 2, 4],
            max_per_gpu: 3,
            sms_a100: 28,
            sms_gh100: 32,
            media_ext: false,
        },
        ReferenceKind {
            names: ["3g.20gb", "3g.40gb", "3g.40gb", "3g.71gb"],
            compute: 3,
            width: 4,
            starts: &[0, 4],
            max_per_gpu: 2,
            sms_a100: 42,
            sms_gh100: 60,
            media_ext: false,
        },
        ReferenceKind {
            names: ["4g.20gb", "4g.40gb", "4g.40gb", "4g.71gb"],
            compute: 4,
            width: 4,
            starts: &[0],
            max_per_gpu: 1,
            sms_a100: 56,
            sms_gh100: 64,
            media_ext: false,
        },
        ReferenceKind {
            names: ["7g.40gb", "7g.80gb", "7g.80gb", "7g.141gb"],
            compute: 7,
            width: 8,
            starts: &[0],
            max_per_gpu: 1,
            sms_a100: 98,
            sms_gh100: 132,
            media_ext: false,
        },
    ];

    #[test]
    fn catalog_matches_reference() {
        for (mi, name) in MIG_MODELS.iter().enumerate() {
            let m = lookup(name);
            assert!(
                m.known && m.mig && m.name == *name,
                "lookup({name}) = {m:?}"
            );
            assert_eq!(m.profiles.len(), REFERENCE_KINDS.len(), "{name}");
            for k in &REFERENCE_KINDS {
                let p = m.profile(k.names[mi]).unwrap();
                let want_sms = if name.starts_with("A100") {
                    k.sms_a100
                } else {
                    k.sms_gh100
                };
                assert_eq!(
                    (
                        p.compute,
                        p.memory,
                        &*p.starts,
                        p.max_per_gpu,
                        p.sms,
                        p.media_ext
                    ),
                    (
                        k.compute,
                        k.width,
                        k.starts,
                        k.max_per_gpu,
                        want_sms,
                        k.media_ext
                    ),
                    "{name} {}",
                    p.name
                );
            }
        }
    }

    #[test]
    fn profile_memory_is_what_the_driver_reports_or_the_nominal_size() {
        let cases = [
            ("A100-40GB", "1g.5gb", 5 * 1024),
            ("A100-40GB", "1g.5gb+me", 5 * 1024),
            // Where nvidia-smi's report is known, the reported size.
            ("H100-80GB", "3g.40gb", (39.50 * 1024.0) as i64),
            ("H100-80GB", "1g.20gb", 20090), // 19.62 GiB, truncated
            ("H200-141GB", "1g.18gb", 16 * 1024),
            ("H200-141GB", "7g.141gb", 140 * 1024),
        ];
        for (model, profile, want) in cases {
            let m = lookup(model);
            assert_eq!(
                m.profile(profile).unwrap().memory_mib,
                want,
                "{model} {profile}"
            );
        }
    }

    #[test]
    fn catalog_profiles_are_ordered_small_to_large() {
        for m in catalog() {
            for w in m.profiles.windows(2) {
                assert!(
                    !crate::gpu::model::smaller(&w[1], &w[0]),
                    "{}: {} comes after the larger {}",
                    m.name,
                    w[1].name,
                    w[0].name
                );
            }
            assert!(
                m.known && !m.source.is_empty(),
                "{}: catalog models must be known and name a source",
                m.name
            );
            assert_eq!(m.mig, !m.profiles.is_empty(), "{}", m.name);
            assert!(
                !m.mig || !m.pci_device_ids.is_empty(),
                "{}: a MIG model needs its PCI device ids",
                m.name
            );
        }
    }

    #[test]
    fn every_profile_name_is_static_and_known_to_the_interner() {
        for m in catalog() {
            for p in &m.profiles {
                assert!(matches!(p.name, Cow::Borrowed(_)), "{} {}", m.name, p.name);
                assert_eq!(static_profile_name(&p.name), Some(&*p.name));
            }
        }
        assert_eq!(static_profile_name("5g.50gb"), None);
    }

    #[test]
    fn lookup_finds_names_and_aliases() {
        let cases = [
            (
                "finds a canonical name",
                "H100-80GB",
                "H100-80GB",
                true,
                true,
            ),
            ("ignores case", "h100-80gb", "H100-80GB", true, true),
            (
                "accepts a GFD product label",
                "NVIDIA-H100-80GB-HBM3",
                "H100-80GB",
                true,
                true,
            ),
            (
                "accepts a GFD product label in any case",
                "nvidia-a100-sxm4-80gb",
                "A100-80GB",
                true,
                true,
            ),
            (
                "accepts the H200 NVL label",
                "NVIDIA-H200-NVL",
                "H200-141GB",
                true,
                true,
            ),
            (
                "maps the trace's V100M16",
                "V100M16",
                "V100-16GB",
                true,
                false,
            ),
            (
                "maps the trace's V100M32 in lower case",
                "v100m32",
                "V100-32GB",
                true,
                false,
            ),
            ("knows the trace's undisclosed G2", "G2", "G2", true, false),
            ("knows the trace's undisclosed G3", "g3", "G3", true, false),
            ("knows the T4 label", "Tesla-T4", "T4", true, false),
            (
                "makes an opaque model of an unknown name",
                "B200",
                "B200",
                false,
                false,
            ),
            (
                "makes an opaque model of the empty name",
                "",
                "",
                false,
                false,
            ),
        ];
        for (name, input, want_name, want_known, want_mig) in cases {
            let m = lookup(input);
            assert_eq!(
                (&*m.name, m.known, m.mig),
                (want_name, want_known, want_mig),
                "{name}"
            );
        }
        assert_eq!(go_to_lower("\u{130}Σ"), "iσ");
    }

    #[test]
    fn lookup_knows_every_model_of_the_alibaba_trace() {
        // The distinct values of the model column of openb_node_list_all_node.csv.
        for name in ["A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"] {
            assert!(
                lookup(name).known,
                "lookup({name}) is opaque, want a catalog model"
            );
        }
    }

    #[test]
    fn lookup_gives_each_unknown_name_its_own_model() {
        assert_ne!(
            lookup("B200"),
            lookup("B200"),
            "two lookups of an unknown name share one model"
        );
        assert_eq!(
            lookup("G2"),
            lookup("g2"),
            "lookups of a catalog model should share the catalog's"
        );
    }

    #[test]
    fn model_json_has_the_go_field_names() {
        let json = serde_json::to_string(&*lookup("G2")).unwrap();
        assert_eq!(
            json,
            format!(
                r#"{{"name":"G2","aliases":null,"memoryMiB":0,"sms":0,"mig":false,"known":true,"source":"{ALI_TRACE_ONLY}"}}"#
            )
        );
        let h = serde_json::to_value(&*lookup("H100-80GB")).unwrap();
        assert_eq!(h["pciDeviceIDs"][0], "0x2330");
        assert_eq!(h["aliases"][0], "NVIDIA-H100-80GB-HBM3");
        assert_eq!(
            h["profiles"][4],
            serde_json::json!({"name": "3g.40gb", "compute": 3, "memory": 4, "starts": [0, 4],
                "memoryMiB": 40448, "sms": 60, "mediaExt": false, "maxPerGPU": 2})
        );
    }

    /// The catalog's H200 entry against what a real H200 reports
    /// (testdata/h200-nvidia-smi-mig.txt: nvidia-smi --query-gpu, mig -lgip
    /// and mig -lgipp, driver 580.159.04): every profile's name, instance
    /// memory, SMs and allowed placements, the card's memory and PCI
    /// device id.
    #[test]
    fn h200_catalog_matches_the_driver() {
        let transcript = include_str!("testdata/h200-nvidia-smi-mig.txt");
        let m = lookup("H200-141GB");
        let mut by_id = BTreeMap::new();
        let mut seen_card = false;
        let mut seen_profiles = 0;
        let mut seen_placements = 0;
        for line in transcript.lines() {
            if line.starts_with("NVIDIA H200,") {
                seen_card = true;
                let fields: Vec<&str> = line.split(", ").collect();
                assert_eq!(fields[1], format!("{} MiB", m.memory_mib), "card memory");
                let id = format!("0x{}", fields[2][2..6].to_ascii_uppercase());
                assert!(
                    m.pci_device_ids.iter().any(|x| x.eq_ignore_ascii_case(&id)),
                    "device id {} not in {:?}",
                    fields[2],
                    m.pci_device_ids
                );
            }
            // "|   0  MIG 1g.18gb         19     7/7        16.00      No     16     1     0   |"
            if let Some(rest) = line.strip_prefix("|   0  MIG ") {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let (name, id, gib, sms) = (f[0], f[1], f[3], f[5]);
                seen_profiles += 1;
                let p = m
                    .profile(name)
                    .unwrap_or_else(|e| panic!("driver profile {name}: {e}"));
                by_id.insert(id.to_string(), name.to_string());
                let gib: f64 = gib.parse().unwrap();
                assert_eq!(
                    p.memory_mib,
                    (gib * 1024.0) as i64,
                    "{name}: driver {gib} GiB"
                );
                assert_eq!(p.sms.to_string(), sms, "{name} SMs");
            }
            // "GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1"
            if let Some((head, tail)) = line.split_once(" Placement") {
                let id = head.rsplit(' ').next().unwrap();
                let (starts, width) = tail.split_once('{').unwrap().1.split_once("}:").unwrap();
                let p = m.profile(&by_id[id]).unwrap();
                seen_placements += 1;
                assert_eq!(
                    (
                        super::super::geometry::join_starts(&p.starts, ","),
                        p.memory.to_string()
                    ),
                    (starts.to_string(), width.to_string()),
                    "{} placements",
                    p.name
                );
            }
        }
        assert!(seen_card, "the transcript's card line was not read");
        assert_eq!(seen_profiles, m.profiles.len(), "driver profiles");
        assert_eq!(seen_placements, m.profiles.len(), "driver placements");
    }
}
