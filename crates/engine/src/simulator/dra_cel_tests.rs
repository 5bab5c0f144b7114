use super::*;

fn gpu() -> Device {
    Device {
        name: "gpu-0".into(),
        attributes: vec![
            ("model".into(), AttributeValue::String("A100".into())),
            (
                "driverVersion".into(),
                AttributeValue::Version("1.2.3".into()),
            ),
            ("index".into(), AttributeValue::Int(0)),
            (
                "ext.example.com/family".into(),
                AttributeValue::String("ampere".into()),
            ),
        ],
        capacity: vec![("memory".into(), Quantity::parse("40Gi").unwrap())],
        nodes: None,
        allow_multiple: false,
        consumes: Vec::new(),
        tainted: false,
    }
}

fn check(expr: &str) -> bool {
    let mut s = Selectors::default();
    let r = s.matches(&Arc::from(expr), "gpu.example.com", &gpu());
    assert!(s.problems.is_empty(), "{expr}: {:?}", s.problems);
    r
}

#[test]
fn attributes_by_domain_and_driver() {
    assert!(check("device.driver == 'gpu.example.com'"));
    assert!(check(
        "device.attributes['gpu.example.com'].model == 'A100'"
    ));
    assert!(check(
        "device.attributes[\"ext.example.com\"].family == \"ampere\""
    ));
    assert!(check("device.attributes['gpu.example.com'].index == 0"));
    assert!(!check(
        "device.attributes['gpu.example.com'].model == 'H100'"
    ));
    assert!(check("!device.allowMultipleAllocations"));
    assert!(check(
        "cel.bind(dra, device.attributes['gpu.example.com'], dra.model == 'A100' && dra.index < 4)"
    ));
}

#[test]
fn an_unknown_domain_is_an_empty_map() {
    assert!(!check("has(device.attributes['other.example.com'].model)"));
    assert!(check("!has(device.attributes['other.example.com'].model)"));
    assert!(check("has(device.attributes['gpu.example.com'].model)"));
}

#[test]
fn quantities_compare_exactly() {
    assert!(check(
        "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) == 0"
    ));
    assert!(check(
        "device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('32Gi'))"
    ));
    assert!(check(
        "device.capacity['gpu.example.com'].memory.isLessThan(quantity('41Gi'))"
    ));
    assert!(check(
        "device.capacity['gpu.example.com'].memory == quantity('40960Mi')"
    ));
    assert!(check(
        "quantity('1500m').add(quantity('500m')).asInteger() == 2"
    ));
    assert!(check("quantity('2').sub(3).sign() == -1"));
    assert!(check(
        "!quantity('1500m').isInteger() && isQuantity('1Gi') && !isQuantity('x')"
    ));
    assert!(check("quantity('500m').asApproximateFloat() == 0.5"));
}

#[test]
fn versions_compare_by_precedence() {
    assert!(check(
        "device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.2.0'))"
    ));
    assert!(check(
        "device.attributes['gpu.example.com'].driverVersion == semver('1.2.3+build.5')"
    ));
    assert!(check("semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))"));
    assert!(check(
        "semver('2.3.4').major() == 2 && semver('2.3.4').minor() == 3 && semver('2.3.4').patch() == 4"
    ));
    assert!(check("isSemver('1.0.0') && !isSemver('v1')"));
}

#[test]
fn a_missing_attribute_fails_the_device_quietly() {
    assert!(!check("device.attributes['gpu.example.com'].numa == 1"));
}

#[test]
fn broken_selectors_match_nothing_and_are_warned_once() {
    let mut s = Selectors::default();
    let d = gpu();
    for expr in [
        "device.driver ==",
        "device.driver",
        "semver('not a version').major() == 1",
    ] {
        let e: Arc<str> = expr.into();
        assert!(!s.matches(&e, "gpu.example.com", &d), "{expr}");
        assert!(!s.matches(&e, "gpu.example.com", &d), "{expr}");
    }
    assert_eq!(s.problems.len(), 3, "{:?}", s.problems);
    assert!(
        s.problems[0].contains("does not compile"),
        "{:?}",
        s.problems
    );
}

#[test]
fn string_literals_are_found() {
    assert_eq!(
        string_literals(r#"device.attributes["a.io"].x == 'b\'c' && "" == ''"#),
        ["a.io", "b'c"]
    );
}
