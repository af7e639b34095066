use super::{COMPUTE_SLICES, GpuError, Layout, MEMORY_SLICES, Model, Placement, Profile};

/// What a valid layout occupies on its GPU. It is small and lives on the
/// stack, so checking a layout allocates nothing unless it is invalid.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Usage {
    /// Bit i set when memory slice i is taken.
    pub(crate) mask: u8,
    /// Compute slices taken.
    pub(crate) compute: i32,
    /// Index in the layout of the +me instance, if any.
    pub(crate) me: Option<usize>,
}

impl Usage {
    /// Whether one more instance of `p` at `start` keeps a valid layout
    /// with this usage valid; `count` is how many instances of `p` it
    /// already holds.
    pub(crate) fn fits(&self, p: &Profile, start: i32, count: i32) -> bool {
        p.can_start(start)
            && self.mask & p.mask(start) == 0
            && self.compute + p.compute <= COMPUTE_SLICES
            && !(p.media_ext && self.me.is_some())
            && count < p.max_per_gpu
    }

    /// The starts (bit s for start s) at which one more instance of `p`
    /// fits, as `fits` says.
    pub(crate) fn free_starts(&self, p: &Profile, count: i32) -> u8 {
        let mut starts = 0u8;
        for start in 0..MEMORY_SLICES {
            if self.fits(p, start, count) {
                starts |= 1 << start;
            }
        }
        starts
    }
}

impl Model {
    /// Checks that the instances of `l` can share one GPU of the model: each
    /// profile exists and starts where it may, no two memory ranges
    /// overlap, the compute slices add up to at most `COMPUTE_SLICES`, at
    /// most one instance owns the media engines (+me), and no profile is
    /// used more often than its `max_per_gpu`. The error names the
    /// offending instance. An empty layout is valid on every model, MIG or
    /// not.
    pub fn validate(&self, l: &[Placement]) -> Result<(), GpuError> {
        self.usage(l).map(|_| ())
    }

    pub(crate) fn usage(&self, l: &[Placement]) -> Result<Usage, GpuError> {
        let mut u = Usage::default();
        if l.is_empty() {
            return Ok(u);
        }
        if !self.mig {
            return Err(self.err_no_mig());
        }
        // Every accepted instance takes at least one memory slice, so this
        // loop fails on an overlap within MEMORY_SLICES+1 rounds, however
        // long l is.
        for (i, pl) in l.iter().enumerate() {
            let Some(p) = self.find(&pl.profile) else {
                let err = self
                    .profile(&pl.profile)
                    .expect_err("find found no profile of that name");
                return Err(GpuError::InPlacement {
                    placement: pl.clone(),
                    source: Box::new(err),
                });
            };
            if !p.can_start(pl.start) {
                return Err(GpuError::StartNotAllowed {
                    placement: pl.clone(),
                    allowed: join_starts(&p.starts, ","),
                });
            }
            let mask = p.mask(pl.start);
            if u.mask & mask != 0 {
                return Err(GpuError::Overlap {
                    placement: pl.clone(),
                    other: l[self.first_overlap(&l[..i], mask)].clone(),
                });
            }
            if let (true, Some(me)) = (p.media_ext, u.me) {
                return Err(GpuError::SecondMediaExt {
                    placement: pl.clone(),
                    other: l[me].clone(),
                });
            }
            if count_profile(&l[..i], &pl.profile) >= p.max_per_gpu {
                return Err(GpuError::TooMany {
                    placement: pl.clone(),
                    max: p.max_per_gpu,
                    profile: p.name.to_string(),
                });
            }
            if u.compute + p.compute > COMPUTE_SLICES {
                return Err(GpuError::ComputeOver {
                    placement: pl.clone(),
                    total: u.compute + p.compute,
                });
            }
            u.mask |= mask;
            u.compute += p.compute;
            if p.media_ext {
                u.me = Some(i);
            }
        }
        Ok(u)
    }

    /// The index in `l` (already validated) of the first instance whose
    /// memory meets `mask`. Only error paths call it.
    fn first_overlap(&self, l: &[Placement], mask: u8) -> usize {
        l.iter()
            .position(|pl| {
                self.find(&pl.profile)
                    .is_some_and(|p| p.mask(pl.start) & mask != 0)
            })
            .unwrap_or(0)
    }

    /// Every placement of profile `want` that can join the valid layout
    /// `used`, by start. It is empty when `want` does not fit; the error is
    /// for a bad `used` layout or an unknown profile.
    pub fn free_placements(
        &self,
        used: &[Placement],
        want: &str,
    ) -> Result<Vec<Placement>, GpuError> {
        let (p, starts) = self.free_starts_of(used, want)?;
        Ok(starts_of(starts)
            .map(|start| Placement {
                profile: p.name.clone(),
                start,
            })
            .collect())
    }

    /// What `free_placements` offers, as a mask of starts (bit s for start
    /// s), without building a list.
    pub fn free_starts(&self, used: &[Placement], want: &str) -> Result<u8, GpuError> {
        self.free_starts_of(used, want).map(|(_, starts)| starts)
    }

    fn free_starts_of(&self, used: &[Placement], want: &str) -> Result<(&Profile, u8), GpuError> {
        let u = self
            .usage(used)
            .map_err(|e| GpuError::UsedLayout(Box::new(e)))?;
        let p = self.profile(want)?;
        let count = count_profile(used, &p.name);
        Ok((p, u.free_starts(p, count)))
    }

    /// Every valid layout without +me profiles to which no further non-+me
    /// instance can be added: the ways to carve up a whole GPU. Each layout
    /// is sorted by start (two instances never share a start); the list is
    /// in lexicographic order of (start, profile in catalog order). It is
    /// empty for a model without MIG. Each call builds a fresh list.
    pub fn maximal_layouts(&self) -> Vec<Layout> {
        if !self.mig {
            return Vec::new();
        }
        let mut s = LayoutSearch {
            m: self,
            cur: Vec::new(),
            counts: vec![0; self.profiles.len()],
            out: Vec::new(),
        };
        s.walk(0, Usage::default());
        s.out
    }
}

/// Visits every valid non-+me layout exactly once, adding instances in
/// increasing start order, and keeps the maximal ones.
struct LayoutSearch<'a> {
    m: &'a Model,
    cur: Vec<Placement>,
    /// Instances of each profile in `cur`, by index in `m.profiles`.
    counts: Vec<i32>,
    out: Vec<Layout>,
}

impl LayoutSearch<'_> {
    fn walk(&mut self, from: i32, u: Usage) {
        if self.maximal(u) {
            self.out.push(Layout(self.cur.clone()));
            return;
        }
        let m = self.m;
        for start in from..MEMORY_SLICES {
            for (i, p) in m.profiles.iter().enumerate() {
                if p.media_ext || !u.fits(p, start, self.counts[i]) {
                    continue;
                }
                self.cur.push(Placement {
                    profile: p.name.clone(),
                    start,
                });
                self.counts[i] += 1;
                let next = Usage {
                    mask: u.mask | p.mask(start),
                    compute: u.compute + p.compute,
                    me: None,
                };
                self.walk(start + 1, next);
                self.counts[i] -= 1;
                self.cur.pop();
            }
        }
    }

    /// Whether no non-+me instance fits anywhere, before or after the
    /// starts the walk has reached.
    fn maximal(&self, u: Usage) -> bool {
        self.m
            .profiles
            .iter()
            .zip(&self.counts)
            .filter(|(p, _)| !p.media_ext)
            .all(|(p, &count)| u.free_starts(p, count) == 0)
    }
}

/// The starts in a mask of starts, ascending.
pub fn starts_of(mask: u8) -> impl Iterator<Item = i32> {
    (0..MEMORY_SLICES).filter(move |s| mask & (1 << s) != 0)
}

pub(crate) fn count_profile(l: &[Placement], name: &str) -> i32 {
    l.iter()
        .filter(|pl| super::layout::same_name(&pl.profile, name))
        .count() as i32
}

/// `xs` joined by `sep`: "0,2,4".
pub(crate) fn join_starts(xs: &[i32], sep: &str) -> String {
    let parts: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
    parts.join(sep)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::collections::BTreeSet;

    use super::*;
    use crate::gpu::catalog::tests::REFERENCE_KINDS;
    use crate::gpu::tests::{MIG_MODELS, check_err, must_layout};
    use crate::gpu::{ModelRef, lookup};
    use crate::random::Rand;

    #[test]
    fn validate() {
        let cases = [
            // The reference's valid examples.
            (
                "accepts 4g and 3g side by side",
                "H100-80GB",
                "4g.40gb@0,3g.40gb@4",
                "",
            ),
            (
                "accepts two 3g with one compute slice idle",
                "H100-80GB",
                "3g.40gb@0,3g.40gb@4",
                "",
            ),
            (
                "accepts 2g, two 1g and a 3g",
                "H100-80GB",
                "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4",
                "",
            ),
            (
                "accepts 4g, 2g and 1g",
                "H100-80GB",
                "4g.40gb@0,2g.20gb@4,1g.10gb@6",
                "",
            ),
            (
                "accepts seven 1g leaving memory slice 7 unused",
                "H100-80GB",
                "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6",
                "",
            ),
            // The reference's invalid examples.
            (
                "rejects a 2g at 6",
                "H100-80GB",
                "2g.20gb@6",
                "2g.20gb@6: start 6 not allowed (allowed: 0,2,4)",
            ),
            (
                "rejects a 4g at 4",
                "H100-80GB",
                "4g.40gb@4",
                "4g.40gb@4: start 4 not allowed (allowed: 0)",
            ),
            // More.
            ("accepts the empty layout", "H100-80GB", "", ""),
            (
                "accepts the empty layout on a GPU without MIG",
                "T4",
                "",
                "",
            ),
            (
                "accepts placements in any order",
                "H100-80GB",
                "3g.40gb@4,4g.40gb@0",
                "",
            ),
            ("accepts the whole GPU", "H200-141GB", "7g.141gb@0", ""),
            (
                "accepts a 1g with 2/8 memory in the last two slices",
                "A100-80GB",
                "3g.40gb@0,2g.20gb@4,1g.20gb@6",
                "",
            ),
            (
                "accepts one +me instance beside plain 1g",
                "H100-80GB",
                "1g.10gb+me@0,1g.10gb@1,1g.10gb@2",
                "",
            ),
            (
                "accepts A100-40GB names on an A100-40GB",
                "A100-40GB",
                "1g.5gb@0,1g.10gb@2,2g.10gb@4,1g.5gb+me@6",
                "",
            ),
            (
                "rejects overlapping memory",
                "H100-80GB",
                "4g.40gb@0,2g.20gb@2",
                "2g.20gb@2 overlaps 4g.40gb@0",
            ),
            (
                "rejects the same instance twice",
                "H100-80GB",
                "3g.40gb@4,3g.40gb@4",
                "3g.40gb@4 overlaps 3g.40gb@4",
            ),
            (
                "names the instance a new one overlaps",
                "H100-80GB",
                "1g.10gb@0,1g.10gb@5,3g.40gb@4",
                "3g.40gb@4 overlaps 1g.10gb@5",
            ),
            (
                "rejects anything beside the whole GPU",
                "H100-80GB",
                "7g.80gb@0,1g.10gb@3",
                "1g.10gb@3 overlaps 7g.80gb@0",
            ),
            (
                "rejects an unknown profile",
                "H100-80GB",
                "3g.40gb@0,5g.50gb@0",
                r#"5g.50gb@0: unknown MIG profile "5g.50gb" for H100-80GB (known: 1g.10gb,"#,
            ),
            (
                "rejects another model's profile",
                "H100-80GB",
                "1g.5gb@0",
                r#"1g.5gb@0: unknown MIG profile "1g.5gb" for H100-80GB"#,
            ),
            (
                "rejects two +me instances",
                "H100-80GB",
                "1g.10gb+me@0,1g.10gb+me@1",
                "1g.10gb+me@1: at most one +me instance per GPU, and 1g.10gb+me@0 already has the media engines",
            ),
            (
                "rejects start 7, where no profile may start",
                "H100-80GB",
                "1g.10gb@7",
                "1g.10gb@7: start 7 not allowed (allowed: 0,1,2,3,4,5,6)",
            ),
            (
                "rejects MIG instances on a GPU without MIG",
                "T4",
                "1g.10gb@0",
                r#"model "T4" does not support MIG"#,
            ),
            (
                "rejects MIG instances on an unknown GPU",
                "B200",
                "1g.23gb@0",
                r#"model "B200" is not in the GPU catalog"#,
            ),
        ];
        for (name, model, layout, want) in cases {
            let err = lookup(model).validate(&must_layout(layout)).err();
            check_err(name, err.as_ref(), want);
        }
        // A start no text form can hold.
        let err = lookup("H100-80GB")
            .validate(&[Placement::new("3g.40gb", -4)])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "3g.40gb@-4: start -4 not allowed (allowed: 0,4)"
        );
    }

    /// A geometry no real GPU has, to reach the compute and count rules,
    /// which the real placement tables already imply.
    fn toy_model() -> ModelRef {
        let all: &'static [i32] = &[0, 1, 2, 3, 4, 5, 6, 7];
        let profile =
            |name: &'static str, compute, memory, starts: &'static [i32], max_per_gpu| Profile {
                name: Cow::Borrowed(name),
                compute,
                memory,
                starts: Cow::Borrowed(starts),
                memory_mib: 0,
                sms: 0,
                media_ext: false,
                max_per_gpu,
            };
        ModelRef::new(Model {
            name: "toy".into(),
            mig: true,
            known: true,
            profiles: vec![
                profile("1c", 1, 1, all, 2),
                profile("3c", 3, 1, all, 8),
                profile("bad", 1, 4, &[6], 1), // start 6 would run past slice 7
            ],
            ..Model::default()
        })
    }

    #[test]
    fn validate_rules_the_real_tables_imply() {
        let cases = [
            ("accepts up to the profile's count", "1c@0,1c@1", ""),
            (
                "rejects more than the profile's count",
                "1c@0,1c@1,1c@2",
                "1c@2: at most 2 1c per GPU",
            ),
            ("accepts exactly seven compute slices", "3c@0,3c@1,1c@2", ""),
            (
                "rejects more than seven compute slices",
                "3c@0,3c@1,3c@2",
                "3c@2: compute slices would add up to 9, more than 7",
            ),
            (
                "rejects a listed start that runs past the last slice",
                "bad@6",
                "bad@6: start 6 not allowed (allowed: 6)",
            ),
        ];
        let toy = toy_model();
        for (name, layout, want) in cases {
            check_err(
                name,
                toy.validate(&must_layout(layout)).err().as_ref(),
                want,
            );
        }
    }

    #[test]
    fn free_placements() {
        let cases = [
            (
                "finds both halves of an empty GPU for a 3g",
                "H100-80GB",
                "",
                "3g.40gb",
                "3g.40gb@0,3g.40gb@4",
                "",
            ),
            (
                "finds every 1g start on an empty GPU",
                "H100-80GB",
                "",
                "1g.10gb",
                "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6",
                "",
            ),
            (
                "skips starts the used instances cover",
                "H100-80GB",
                "3g.40gb@0",
                "2g.20gb",
                "2g.20gb@4",
                "",
            ),
            (
                "offers slice 6 to a 1g with 2/8 memory",
                "H100-80GB",
                "3g.40gb@0",
                "1g.20gb",
                "1g.20gb@4,1g.20gb@6",
                "",
            ),
            (
                "finds the gaps between instances",
                "H100-80GB",
                "2g.20gb@0,1g.10gb@3,3g.40gb@4",
                "1g.10gb",
                "1g.10gb@2",
                "",
            ),
            (
                "finds nothing on a full GPU",
                "H100-80GB",
                "4g.40gb@0,3g.40gb@4",
                "1g.10gb",
                "",
                "",
            ),
            (
                "finds nothing for a second +me",
                "H100-80GB",
                "1g.10gb+me@0",
                "1g.10gb+me",
                "",
                "",
            ),
            (
                "lets a plain 1g join a +me",
                "H100-80GB",
                "1g.10gb+me@0,3g.40gb@4",
                "1g.10gb",
                "1g.10gb@1,1g.10gb@2,1g.10gb@3",
                "",
            ),
            (
                "finds nothing beside the whole GPU",
                "A100-40GB",
                "7g.40gb@0",
                "1g.5gb",
                "",
                "",
            ),
            (
                "rejects an invalid used layout",
                "H100-80GB",
                "2g.20gb@6",
                "1g.10gb",
                "",
                "used layout: 2g.20gb@6: start 6 not allowed",
            ),
            (
                "rejects an unknown profile",
                "H100-80GB",
                "",
                "5g.50gb",
                "",
                r#"unknown MIG profile "5g.50gb""#,
            ),
            (
                "rejects a GPU without MIG",
                "T4",
                "",
                "1g.10gb",
                "",
                r#"model "T4" does not support MIG"#,
            ),
        ];
        for (name, model, used, want, want_out, want_err) in cases {
            let m = lookup(model);
            let used = must_layout(used);
            let got = m.free_placements(&used, want);
            check_err(name, got.as_ref().err(), want_err);
            let got = got.unwrap_or_default();
            assert_eq!(Layout::text(&got), want_out, "{name}");
            // The mask form says the same.
            if let Ok(starts) = m.free_starts(&used, want) {
                let from_mask: Vec<i32> = starts_of(starts).collect();
                let from_list: Vec<i32> = got.iter().map(|p| p.start).collect();
                assert_eq!(from_mask, from_list, "{name}");
            }
        }
        let err = lookup("L4").free_placements(&[], "1g.10gb").unwrap_err();
        assert!(err.is_no_mig(), "{err:?}");
        let err = lookup("L4")
            .free_placements(&must_layout("1g.10gb@0"), "1g.10gb")
            .unwrap_err();
        assert!(err.is_no_mig(), "{err:?}");
    }

    #[test]
    fn validate_ignores_order() {
        let m = lookup("A100-80GB");
        for l in m.maximal_layouts() {
            let mut r = l.clone();
            r.reverse();
            assert!(m.validate(&r).is_ok(), "{l} is valid but not reversed");
        }
    }

    #[test]
    fn maximal_layouts_are_valid_sorted_and_maximal() {
        for name in MIG_MODELS {
            let m = lookup(name);
            let layouts = m.maximal_layouts();
            let mut seen = BTreeSet::new();
            for l in &layouts {
                assert!(m.validate(l).is_ok(), "{name}: {l} is invalid");
                assert!(
                    l.windows(2).all(|w| w[0].start < w[1].start),
                    "{name}: {l} is not sorted by start"
                );
                assert!(seen.insert(l.to_string()), "{name}: {l} is listed twice");
                assert!(
                    !l.iter().any(|pl| pl.profile.ends_with("+me")),
                    "{name}: {l} holds a +me profile"
                );
                for p in m.profiles.iter().filter(|p| !p.media_ext) {
                    let free = m.free_placements(l, &p.name).unwrap();
                    assert!(
                        free.is_empty(),
                        "{name}: {l} is not maximal: {} still fits at {free:?}",
                        p.name
                    );
                }
            }
        }
    }

    #[test]
    fn maximal_layouts_are_deterministic() {
        let m = lookup("H100-80GB");
        let (mut a, b) = (m.maximal_layouts(), m.maximal_layouts());
        assert_eq!(a, b);
        assert_eq!(
            a.last().map(|l| l.to_string()).as_deref(),
            Some("7g.80gb@0"),
            "the whole GPU sorts last"
        );
        assert_eq!(
            a[0].to_string(),
            "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"
        );
        a[0][0].profile = "changed".into();
        assert_ne!(
            m.maximal_layouts()[0][0].profile,
            "changed",
            "maximal_layouts returns shared lists"
        );
    }

    #[test]
    fn maximal_layouts_is_empty_without_mig() {
        for name in ["T4", "G2", "unknown-gpu"] {
            assert!(lookup(name).maximal_layouts().is_empty(), "{name}");
        }
    }

    /// Every subset of every (profile, start) of the reference geometry,
    /// enumerated without the module's code, keeping the valid subsets no
    /// further instance can join, as sorted strings.
    fn brute_force_maximal(model: usize) -> Vec<String> {
        struct Cand {
            name: &'static str,
            start: i32,
            compute: i32,
            mask: u32,
            kind: usize,
            max_count: i32,
        }
        let mut cands = Vec::new();
        for (ki, k) in REFERENCE_KINDS
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.media_ext)
        {
            for &s in k.starts {
                let mask = (s..s + k.width).fold(0u32, |m, i| m | 1 << i);
                cands.push(Cand {
                    name: k.names[model],
                    start: s,
                    compute: k.compute,
                    mask,
                    kind: ki,
                    max_count: k.max_per_gpu,
                });
            }
        }
        let valid = |set: u32| {
            let (mut mem, mut compute, mut count) = (0u32, 0, [0; 7]);
            for (i, c) in cands.iter().enumerate() {
                if set & (1 << i) == 0 {
                    continue;
                }
                if mem & c.mask != 0 {
                    return false;
                }
                mem |= c.mask;
                compute += c.compute;
                count[c.kind] += 1;
                if count[c.kind] > c.max_count {
                    return false;
                }
            }
            mem < 1 << 8 && compute <= 7
        };
        let mut out = Vec::new();
        for set in 0..1u32 << cands.len() {
            if !valid(set) || (0..cands.len()).any(|i| set & (1 << i) == 0 && valid(set | 1 << i)) {
                continue;
            }
            let mut parts: Vec<(i32, String)> = cands
                .iter()
                .enumerate()
                .filter(|(i, _)| set & (1 << i) != 0)
                .map(|(_, c)| (c.start, format!("{}@{}", c.name, c.start)))
                .collect();
            parts.sort();
            out.push(
                parts
                    .into_iter()
                    .map(|(_, s)| s)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        out.sort();
        out
    }

    #[test]
    fn maximal_layouts_match_brute_force() {
        for (i, name) in MIG_MODELS.iter().enumerate() {
            let mut got: Vec<String> = lookup(name)
                .maximal_layouts()
                .iter()
                .map(|l| l.to_string())
                .collect();
            got.sort();
            assert_eq!(got, brute_force_maximal(i), "{name}");
            assert!(got.len() > 20, "{name}: only {} maximal layouts", got.len());
        }
    }

    /// Grows a layout on `m` by picking, at random, among every placement
    /// `free_placements` offers for every profile, until none is left.
    fn random_layout(m: &Model, rng: &mut Rand) -> Layout {
        let mut l = Layout::new();
        loop {
            let mut options = Vec::new();
            for p in &m.profiles {
                options.extend(m.free_placements(&l, &p.name).unwrap());
            }
            if options.is_empty() {
                return l;
            }
            l.push(options[rng.below(options.len())].clone());
            assert!(
                m.validate(&l).is_ok(),
                "{}: a layout built from free_placements is invalid: {l}",
                m.name
            );
        }
    }

    #[test]
    fn random_layouts_built_from_free_placements_validate() {
        let mut rng = Rand::new(2026);
        for name in MIG_MODELS {
            let m = lookup(name);
            let maximal: BTreeSet<String> =
                m.maximal_layouts().iter().map(|l| l.to_string()).collect();
            for _ in 0..500 {
                let mut l = random_layout(&m, &mut rng);
                let mut shuffled = l.clone();
                rng.shuffle(&mut shuffled);
                assert!(
                    m.validate(&shuffled).is_ok(),
                    "{name}: {l} is valid in one order but not in another"
                );
                if l.iter().any(|p| p.profile.contains("+me")) {
                    continue;
                }
                l.sort_by_key(|p| p.start);
                assert!(
                    maximal.contains(&l.to_string()),
                    "{name}: {l} has no room left but is not among the maximal layouts"
                );
            }
        }
    }

    /// `free_placements` must offer exactly the placements `validate` accepts.
    #[test]
    fn free_placements_agrees_with_validate() {
        let mut rng = Rand::new(1);
        for name in MIG_MODELS {
            let m = lookup(name);
            for _ in 0..200 {
                let full = random_layout(&m, &mut rng);
                let used = &full[..rng.below(full.len() + 1)];
                for p in &m.profiles {
                    let free = m.free_placements(used, &p.name).unwrap();
                    for start in -1..=MEMORY_SLICES {
                        let pl = Placement::new(p.name.clone(), start);
                        let mut grown = used.to_vec();
                        grown.push(pl.clone());
                        let accepted = m.validate(&grown).is_ok();
                        assert_eq!(
                            free.contains(&pl),
                            accepted,
                            "{name}: used {}: {pl}",
                            Layout::text(used)
                        );
                    }
                }
            }
        }
    }
}
