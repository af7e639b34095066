//! Helpers the module's tests share, and the property tests of the whole
//! module (the Go build fuzzes the same properties: fuzz_test.go).

use proptest::prelude::*;

use super::*;

/// The MIG models of the catalog.
pub(crate) const MIG_MODELS: [&str; 4] = ["A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"];

/// Fails unless `err` is none when `want` is empty, or holds `want`.
#[track_caller]
pub(crate) fn check_err(name: &str, err: Option<&GpuError>, want: &str) {
    match (err, want) {
        (None, "") => {}
        (Some(e), "") => panic!("{name}: error = {e}, want none"),
        (None, want) => panic!("{name}: no error, want one containing {want:?}"),
        (Some(e), want) => assert!(
            e.to_string().contains(want),
            "{name}: error = {e:?}, want it to contain {want:?}"
        ),
    }
}

/// A fixture layout; a typo in a test is a programming error.
#[track_caller]
pub(crate) fn must_layout(text: &str) -> Layout {
    Layout::parse(text).unwrap_or_else(|e| panic!("layout {text:?}: {e}"))
}

/// Texts of the placement and layout grammar, valid or not: the fuzz
/// seeds of the Go build and random mixtures of their pieces.
fn layout_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("3g.40gb".to_string()),
        Just("1g.10gb+me".to_string()),
        Just("2g.20gb".to_string()),
        Just("1g.5gb".to_string()),
        Just("7g.141gb".to_string()),
        Just("@".to_string()),
        Just(",".to_string()),
        Just(" ".to_string()),
        Just("-".to_string()),
        Just("é".to_string()),
        (0..12u8).prop_map(|d| d.to_string()),
        "[a-z0-9.+_@, -]{0,4}",
    ];
    prop::collection::vec(piece, 0..10).prop_map(|parts| parts.concat())
}

/// A layout made only of real profile names and starts (valid or not) of
/// the catalog's MIG models.
fn layout_of_real_profiles() -> impl Strategy<Value = Layout> {
    let names: Vec<&'static str> = catalog()
        .iter()
        .flat_map(|m| {
            m.profiles.iter().map(|p| match &p.name {
                std::borrow::Cow::Borrowed(s) => *s,
                std::borrow::Cow::Owned(_) => unreachable!("catalog names are static"),
            })
        })
        .collect();
    prop::collection::vec((prop::sample::select(names), -1..9i32), 0..9)
        .prop_map(|v| v.into_iter().map(|(n, s)| Placement::new(n, s)).collect())
}

proptest! {
    #[test]
    fn a_parsed_placement_reads_back_from_its_text(s in layout_text()) {
        if let Ok(p) = Placement::parse(&s) {
            let text = p.to_string();
            let q = Placement::parse(&text);
            prop_assert_eq!(q.as_ref().ok(), Some(&p), "{:?} -> {:?} -> {:?}", s, text, q);
            prop_assert!((0..MEMORY_SLICES).contains(&p.start));
        }
    }

    #[test]
    fn a_parsed_layout_reads_back_from_its_text(s in layout_text()) {
        if let Ok(l) = Layout::parse(&s) {
            let text = l.to_string();
            let m = Layout::parse(&text);
            prop_assert_eq!(m.as_ref().ok(), Some(&l), "{:?} -> {:?} -> {:?}", s, text, m);
        }
    }

    /// A valid layout stays valid through its text form and in any order,
    /// and everything `free_placements` offers keeps it valid, and only
    /// that: it offers exactly what `validate` accepts.
    #[test]
    fn every_valid_layout_stays_valid(l in layout_of_real_profiles(), which in 0..64usize) {
        let m = &catalog()[which % catalog().len()];
        if m.validate(&l).is_err() {
            return Ok(());
        }
        let back = Layout::parse(&l.to_string()).expect("a layout's text parses");
        prop_assert!(m.validate(&back).is_ok());
        let mut reversed = l.clone();
        reversed.reverse();
        prop_assert!(m.validate(&reversed).is_ok(), "{} valid, reversed invalid", l);
        for p in &m.profiles {
            let free = m.free_placements(&l, &p.name).expect("a valid layout has free placements");
            for start in -1..=MEMORY_SLICES {
                let pl = Placement::new(p.name.clone(), start);
                let mut grown = l.clone();
                grown.push(pl.clone());
                let accepted = m.validate(&grown).is_ok();
                prop_assert_eq!(free.contains(&pl), accepted, "{}: {} on {}", m.name, pl, l);
            }
        }
    }
}
