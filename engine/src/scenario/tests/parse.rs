use super::*;

#[test]
fn shipped_scenarios_parse() {
    let mut n = 0;
    for entry in std::fs::read_dir(repo("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let s = load(path.to_str().unwrap(), "x.yaml");
            s.validate().unwrap();
            n += 1;
        }
    }
    assert!(n >= 3);
}
