mod output;

fn main() {}
