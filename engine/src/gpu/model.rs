use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use super::catalog::{BY_NAME, CATALOG, go_to_lower};
use super::{COMPUTE_SLICES, GpuError, MEMORY_SLICES};

/// The share of extra memory `Model::profile_for` asks for above a
/// workload's peak, for what a profile's derivation does not foresee.
///
/// It comes from measurements (shared/reference/h200-measurements.md and
/// the `measured` rows of the profile catalog): once a profile budgets
/// what a process really holds (its tensors, the caching allocator's
/// reserve, the CUDA context), the measured processes held at most what
/// their derivations gave (lora-ft-7b: 26,533 MiB against 26,537), and the
/// derivation of allocated bytes fell short by at most 0.33 % (the LoRA
/// step: 23,462 MiB allocated against 23,384 derived). Two measurements
/// cannot bound the budgets (activations, batch buffers) of the profiles
/// never measured, so the headroom is 5 %, fifteen times the largest
/// error measured; a test of the profile catalog checks it against each
/// measurement. It was 10 % while profiles counted allocated bytes only,
/// which a real LoRA fine-tune exceeded by 9.9 %. (Memory a driver
/// reports below a profile's nominal size is not its job: the catalog's
/// MIG profiles carry the reported sizes where a transcript exists.)
pub const DEFAULT_HEADROOM: f64 = 0.05;

/// One MIG GPU-instance profile of a model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    /// "3g.40gb", "1g.10gb+me".
    pub name: Cow<'static, str>,
    /// Compute slices, of `COMPUTE_SLICES`.
    pub compute: i32,
    /// Memory slices, of `MEMORY_SLICES`; also the placement width.
    pub memory: i32,
    /// Allowed start memory-slice indexes, ascending.
    pub starts: Cow<'static, [i32]>,
    /// Nominal: the GB in the name x 1024, or what the driver reports
    /// where we have its transcript (see the catalog).
    #[serde(rename = "memoryMiB")]
    pub memory_mib: i64,
    pub sms: i32,
    /// "+me": the instance owns the media engines.
    #[serde(rename = "mediaExt")]
    pub media_ext: bool,
    #[serde(rename = "maxPerGPU")]
    pub max_per_gpu: i32,
}

impl Profile {
    /// The profile's share of the GPU's compute, in (0, 1].
    pub fn compute_share(&self) -> f64 {
        f64::from(self.compute) / f64::from(COMPUTE_SLICES)
    }

    /// The memory slices an instance at `start` takes: bit i for each slice
    /// i in [start, start+memory). Bits past the last memory slice are
    /// dropped and a start outside the GPU gives 0, so check `can_start`
    /// first.
    pub fn mask(&self, start: i32) -> u8 {
        if !(0..MEMORY_SLICES).contains(&start) || self.memory <= 0 {
            return 0;
        }
        let width = self.memory.min(MEMORY_SLICES);
        (((1u32 << width) - 1) << start) as u8
    }

    /// Whether an instance of the profile may start at memory slice `start`.
    pub fn can_start(&self, start: i32) -> bool {
        start >= 0 && start + self.memory <= MEMORY_SLICES && self.starts.contains(&start)
    }
}

/// One GPU model. Models from `lookup` and `catalog` are shared and never
/// change.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Model {
    /// Canonical: "H100-80GB", "V100-16GB", "G2".
    pub name: String,
    /// Trace names and GFD product labels `lookup` also accepts.
    #[serde(serialize_with = "null_if_empty")]
    pub aliases: Vec<String>,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: i64,
    /// 0 when unknown.
    pub sms: i32,
    /// "0x2330"; only for MIG models.
    #[serde(rename = "pciDeviceIDs", skip_serializing_if = "Vec::is_empty")]
    pub pci_device_ids: Vec<String>,
    pub mig: bool,
    /// Empty without MIG; small to large.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<Profile>,
    /// False for a model accepted by name only.
    pub known: bool,
    /// Where the facts come from.
    pub source: String,
}

/// Go writes a nil list as `null`; the catalog's empty lists are nil there.
fn null_if_empty<S: Serializer>(v: &[String], s: S) -> Result<S::Ok, S::Error> {
    if v.is_empty() {
        s.serialize_none()
    } else {
        v.serialize(s)
    }
}

impl Model {
    /// One of the model's MIG profiles, by its exact name.
    pub fn profile(&self, name: &str) -> Result<&Profile, GpuError> {
        if !self.mig {
            return Err(self.err_no_mig());
        }
        self.find(name).ok_or_else(|| GpuError::UnknownProfile {
            model: self.name.clone(),
            profile: name.to_string(),
            known: self.profile_names(),
        })
    }

    /// `profile` without the error, for hot paths.
    pub fn find(&self, name: &str) -> Option<&Profile> {
        self.profiles
            .iter()
            .find(|p| super::layout::same_name(&p.name, name))
    }

    fn profile_names(&self) -> String {
        let names: Vec<&str> = self.profiles.iter().map(|p| &*p.name).collect();
        names.join(", ")
    }

    pub(crate) fn err_no_mig(&self) -> GpuError {
        if self.known {
            GpuError::NoMig {
                model: self.name.clone(),
            }
        } else {
            GpuError::NotInCatalog {
                model: self.name.clone(),
            }
        }
    }

    /// The smallest non-+me profile with at least `peak_mib * (1 +
    /// headroom)` of memory and at least the given share of compute (0 to
    /// 1). Smallest means fewest memory slices, then fewest compute slices,
    /// so that the pick wastes the least of the scarcer resource. When the
    /// need is larger than every profile the error's `is_no_fit` is true.
    pub fn profile_for(
        &self,
        peak_mib: i64,
        compute: f64,
        headroom: f64,
    ) -> Result<&Profile, GpuError> {
        // Forgives float rounding when a caller passes a compute share it
        // computed as k/7.
        const SHARE_EPSILON: f64 = 1e-9;
        if peak_mib < 0 {
            return Err(GpuError::NegativePeak(peak_mib));
        }
        if compute.is_nan() || compute < 0.0 || compute == f64::INFINITY {
            return Err(GpuError::BadComputeShare(compute));
        }
        if headroom.is_nan() || headroom < 0.0 || headroom == f64::INFINITY {
            return Err(GpuError::BadHeadroom(headroom));
        }
        if !self.mig {
            return Err(self.err_no_mig());
        }
        let need = peak_mib as f64 * (1.0 + headroom);
        let mut best: Option<&Profile> = None;
        let mut largest: Option<&Profile> = None;
        for p in self.profiles.iter().filter(|p| !p.media_ext) {
            if largest.is_none_or(|l| smaller(l, p)) {
                largest = Some(p);
            }
            if (p.memory_mib as f64) < need || p.compute_share() < compute - SHARE_EPSILON {
                continue;
            }
            if best.is_none_or(|b| smaller(p, b)) {
                best = Some(p);
            }
        }
        match (best, largest) {
            (Some(best), _) => Ok(best),
            (None, None) => Err(GpuError::OnlyMediaExt {
                model: self.name.clone(),
            }),
            (None, Some(largest)) => Err(GpuError::NoFit {
                model: self.name.clone(),
                need,
                peak_mib,
                headroom_percent: headroom * 100.0,
                compute,
                largest: largest.name.to_string(),
                largest_mib: largest.memory_mib,
                largest_share: largest.compute_share(),
            }),
        }
    }
}

/// Orders profiles by memory slices, then compute slices.
pub(crate) fn smaller(a: &Profile, b: &Profile) -> bool {
    if a.memory != b.memory {
        return a.memory < b.memory;
    }
    a.compute < b.compute
}

/// A shared, read-only handle on a `Model`, as every GPU of a cluster holds
/// one. A catalog model is borrowed for `'static` (copying the handle is
/// copying a pointer, so node copies touch no shared counter); any other
/// model, such as the opaque one `lookup` makes of an unknown name, is
/// reference-counted. Two handles are equal when they point at the same
/// model, as Go's `*gpu.Model` values are.
#[derive(Clone)]
pub struct ModelRef(Shared);

#[derive(Clone)]
enum Shared {
    Static(&'static Model),
    Counted(Arc<Model>),
}

impl ModelRef {
    /// A handle on a model of the caller's own.
    pub fn new(m: Model) -> ModelRef {
        ModelRef(Shared::Counted(Arc::new(m)))
    }

    /// A handle on a model that lives for the whole program.
    pub fn from_static(m: &'static Model) -> ModelRef {
        ModelRef(Shared::Static(m))
    }

    /// Whether two handles point at the same model.
    pub fn ptr_eq(a: &ModelRef, b: &ModelRef) -> bool {
        std::ptr::eq::<Model>(&**a, &**b)
    }
}

impl Deref for ModelRef {
    type Target = Model;
    fn deref(&self) -> &Model {
        match &self.0 {
            Shared::Static(m) => m,
            Shared::Counted(m) => m,
        }
    }
}

impl PartialEq for ModelRef {
    fn eq(&self, other: &ModelRef) -> bool {
        ModelRef::ptr_eq(self, other)
    }
}

impl Eq for ModelRef {}

impl fmt::Debug for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModelRef({:?})", self.name)
    }
}

/// Finds a model by name or alias, ignoring case. It always gives a model:
/// a name not in the catalog gives a new opaque model (`known` false, no
/// MIG) of its own, so that a trace with a GPU we have never heard of still
/// loads.
pub fn lookup(name: &str) -> ModelRef {
    let found = BY_NAME
        .get(name)
        .or_else(|| BY_NAME.get(&go_to_lower(name)));
    match found {
        Some(&i) => ModelRef::from_static(&CATALOG[i]),
        None => ModelRef::new(Model {
            name: name.to_string(),
            ..Model::default()
        }),
    }
}

/// Every known model in a stable order.
pub fn catalog() -> &'static [Model] {
    &CATALOG
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::tests::{MIG_MODELS, check_err};

    #[test]
    fn catalog_is_shared_and_stable() {
        let a = catalog();
        let b = catalog();
        assert!(std::ptr::eq(a, b));
        let names: Vec<&str> = a.iter().map(|m| &*m.name).collect();
        assert_eq!(
            names,
            [
                "A100-40GB",
                "A100-80GB",
                "H100-80GB",
                "H200-141GB",
                "L4",
                "L40S",
                "A10",
                "T4",
                "V100-16GB",
                "V100-32GB",
                "P100",
                "G2",
                "G3"
            ]
        );
    }

    #[test]
    fn model_profile_errors() {
        let cases = [
            (
                "names the known profiles",
                "H100-80GB",
                "5g.50gb",
                r#"unknown MIG profile "5g.50gb" for H100-80GB (known: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)"#,
            ),
            (
                "rejects another model's profile name",
                "H100-80GB",
                "1g.5gb",
                r#"unknown MIG profile "1g.5gb" for H100-80GB"#,
            ),
            (
                "is case-sensitive on profile names",
                "H100-80GB",
                "3G.40GB",
                r#"unknown MIG profile "3G.40GB""#,
            ),
            (
                "says a non-MIG model has no MIG",
                "T4",
                "1g.10gb",
                r#"model "T4" does not support MIG"#,
            ),
            (
                "says an unknown model is not in the catalog",
                "B200",
                "1g.23gb",
                r#"model "B200" is not in the GPU catalog, so it does not support MIG"#,
            ),
        ];
        for (name, model, profile, want) in cases {
            let m = lookup(model);
            check_err(name, m.profile(profile).err().as_ref(), want);
        }
        assert!(lookup("T4").profile("x").unwrap_err().is_no_mig());
        assert!(lookup("B200").profile("x").unwrap_err().is_no_mig());
        assert!(!lookup("H100-80GB").profile("x").unwrap_err().is_no_mig());
    }

    #[test]
    fn mask_and_can_start() {
        let h = lookup("H100-80GB");
        let cases = [
            ("1g.10gb", 0, 0b0000_0001, true),
            ("1g.10gb", 6, 0b0100_0000, true),
            ("1g.10gb", 7, 0b1000_0000, false), // one slice wide, but 7 is not an allowed start
            ("1g.20gb", 6, 0b1100_0000, true),
            ("2g.20gb", 6, 0b1100_0000, false),
            ("3g.40gb", 0, 0b0000_1111, true),
            ("3g.40gb", 4, 0b1111_0000, true),
            ("4g.40gb", 4, 0b1111_0000, false),
            ("7g.80gb", 0, 0b1111_1111, true),
            ("7g.80gb", 1, 0b1111_1110, false), // bits past slice 7 are dropped
            ("3g.40gb", -1, 0, false),
            ("3g.40gb", 8, 0, false),
        ];
        for (profile, start, want_mask, want_start) in cases {
            let p = h.profile(profile).unwrap();
            assert_eq!(p.mask(start), want_mask, "{profile}.mask({start})");
            assert_eq!(
                p.can_start(start),
                want_start,
                "{profile}.can_start({start})"
            );
        }
        assert_eq!(h.profile("3g.40gb").unwrap().compute_share(), 3.0 / 7.0);
    }

    #[test]
    fn profile_for() {
        let h = DEFAULT_HEADROOM;
        let cases: Vec<(&str, &str, i64, f64, f64, &str, &str)> = vec![
            (
                "picks the smallest profile for a small need",
                "H100-80GB",
                5000,
                0.0,
                h,
                "1g.10gb",
                "",
            ),
            (
                "picks the smallest profile for no need at all",
                "H100-80GB",
                0,
                0.0,
                0.0,
                "1g.10gb",
                "",
            ),
            (
                "fits a peak just under the profile with its headroom",
                "H100-80GB",
                9500,
                0.0,
                h,
                "1g.10gb",
                "",
            ),
            (
                "moves up when the headroom tips the peak over",
                "H100-80GB",
                9600,
                0.0,
                h,
                "1g.20gb",
                "",
            ),
            (
                "fits the same peak without headroom",
                "H100-80GB",
                9600,
                0.0,
                0.0,
                "1g.10gb",
                "",
            ),
            (
                "prefers a 1g with 2/8 memory to a 2g for memory alone",
                "H100-80GB",
                15000,
                0.0,
                h,
                "1g.20gb",
                "",
            ),
            (
                "takes a 2g when two compute slices are needed",
                "H100-80GB",
                15000,
                2.0 / 7.0,
                h,
                "2g.20gb",
                "",
            ),
            (
                "takes a 3g for 40 GB at 3/7 compute",
                "H100-80GB",
                30000,
                3.0 / 7.0,
                h,
                "3g.40gb",
                "",
            ),
            (
                "takes a 4g when half the compute is needed",
                "H100-80GB",
                30000,
                0.5,
                h,
                "4g.40gb",
                "",
            ),
            (
                "takes the whole GPU for a large peak",
                "H100-80GB",
                70000,
                0.0,
                h,
                "7g.80gb",
                "",
            ),
            (
                "takes the whole GPU for all of the compute",
                "H100-80GB",
                1,
                1.0,
                h,
                "7g.80gb",
                "",
            ),
            (
                "uses the model's own profile sizes",
                "H200-141GB",
                17000,
                0.0,
                h,
                "1g.35gb",
                "",
            ),
            (
                "uses the A100-40GB sizes",
                "A100-40GB",
                4000,
                0.0,
                h,
                "1g.5gb",
                "",
            ),
            (
                "fails on a peak above the largest profile, naming need and largest",
                "H100-80GB",
                80000,
                0.0,
                h,
                "",
                "no MIG profile fits: H100-80GB needs 84000 MiB (80000 MiB peak + 5% headroom) and 0.00 of the compute; the largest profile, 7g.80gb, has 81152 MiB and 1.00",
            ),
            (
                "fails on more than all of the compute",
                "H100-80GB",
                1,
                1.5,
                0.0,
                "",
                "no MIG profile fits",
            ),
            (
                "rejects a negative peak",
                "H100-80GB",
                -1,
                0.0,
                0.0,
                "",
                "peak memory -1 MiB is negative",
            ),
            (
                "rejects a negative compute share",
                "H100-80GB",
                1,
                -0.1,
                0.0,
                "",
                "compute share -0.1 must be a number from 0 to 1",
            ),
            (
                "rejects a NaN compute share",
                "H100-80GB",
                1,
                f64::NAN,
                0.0,
                "",
                "compute share NaN",
            ),
            (
                "rejects an infinite compute share",
                "H100-80GB",
                1,
                f64::INFINITY,
                0.0,
                "",
                "compute share +Inf",
            ),
            (
                "rejects a negative headroom",
                "H100-80GB",
                1,
                0.0,
                -0.5,
                "",
                "memory headroom -0.5",
            ),
            (
                "rejects an infinite headroom",
                "H100-80GB",
                1,
                0.0,
                f64::INFINITY,
                "",
                "memory headroom +Inf must be a finite number >= 0",
            ),
            (
                "rejects a GPU without MIG",
                "V100M32",
                1,
                0.0,
                0.0,
                "",
                r#"model "V100-32GB" does not support MIG"#,
            ),
        ];
        for (name, model, peak, compute, headroom, want, want_err) in cases {
            let m = lookup(model);
            let got = m.profile_for(peak, compute, headroom);
            check_err(name, got.as_ref().err(), want_err);
            if let Ok(p) = got {
                assert_eq!(p.name, want, "{name}");
            }
        }
        let err = lookup("H100-80GB").profile_for(80000, 0.0, h).unwrap_err();
        assert!(err.is_no_fit() && !err.is_no_mig(), "{err:?}");
    }

    #[test]
    fn profile_for_a_model_of_only_media_extension_profiles_says_so() {
        let mut m = (*lookup("H100-80GB")).clone();
        m.profiles.retain(|p| p.media_ext);
        let err = m.profile_for(1, 0.0, 0.0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no MIG profile fits: H100-80GB has only +me profiles"
        );
        assert!(err.is_no_fit());
    }

    #[test]
    fn profile_for_never_picks_media_extensions() {
        for name in MIG_MODELS {
            let m = lookup(name);
            for peak in (0..m.memory_mib).step_by(997) {
                match m.profile_for(peak, 0.0, DEFAULT_HEADROOM) {
                    Ok(p) => {
                        assert!(
                            !p.media_ext && !p.name.ends_with("+me"),
                            "{name} {peak}: {}",
                            p.name
                        );
                        assert!(
                            p.memory_mib as f64 >= peak as f64 * (1.0 + DEFAULT_HEADROOM),
                            "{name} {peak}: too small"
                        );
                    }
                    Err(e) => assert!(e.is_no_fit(), "{name} profile_for({peak}): {e}"),
                }
            }
        }
    }

    #[test]
    fn model_refs_compare_by_identity() {
        let a = lookup("H100-80GB");
        let b = a.clone();
        assert_eq!(a, b);
        let own = ModelRef::new((*a).clone());
        assert_ne!(a, own, "an equal model elsewhere is another model");
        assert_eq!(own.clone(), own);
        assert_eq!(format!("{a:?}"), r#"ModelRef("H100-80GB")"#);
    }
}
