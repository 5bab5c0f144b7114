//! The platform a machine runs on (`aws`, `azure`, `gcp`, `openstack`, `vsphere`, ...), as
//! far as it can be told: from a node's `spec.providerID` scheme, an OpenShift provider spec's
//! kind or a Cluster API infrastructure template's kind. Capacity is the platform's, so two
//! clusters share a capacity failure only on the same platform, whatever their instance types
//! and zones are called.
//!
//! Only the names listed here are known: anything else (a providerID without a scheme, a kind
//! of a provider not listed) is no platform rather than a guess, since a wrong name would keep
//! apart what is the same capacity and no name keeps the match on instance type and place.

/// providerID schemes (`aws:///us-east-1a/i-0abc`), compared without case, and the platform
/// each means. GCE's `gce` is named `gcp`, as the provider specs and templates name it.
const SCHEMES: &[(&str, &str)] = &[
    ("aws", "aws"),
    ("azure", "azure"),
    ("gce", "gcp"),
    ("openstack", "openstack"),
    ("vsphere", "vsphere"),
    ("ibm", "ibmcloud"),
    ("ibmpowervs", "powervs"),
    ("nutanix", "nutanix"),
    ("docker", "docker"),
    ("kubevirt", "kubevirt"),
    ("ovirt", "ovirt"),
    ("metal3", "baremetal"),
    ("baremetalhost", "baremetal"),
    ("hcloud", "hcloud"),
    ("oci", "oci"),
    ("digitalocean", "digitalocean"),
    ("cloudstack", "cloudstack"),
    ("proxmox", "proxmox"),
    ("equinixmetal", "equinixmetal"),
    ("packet", "equinixmetal"),
];

/// Kinds of OpenShift provider specs (`spec.template.spec.providerSpec.value.kind`) and of
/// Cluster API infrastructure machine templates, and the platform each means.
const KINDS: &[(&str, &str)] = &[
    // OpenShift's Machine API provider specs.
    ("AWSMachineProviderConfig", "aws"),
    ("AzureMachineProviderSpec", "azure"),
    ("GCPMachineProviderSpec", "gcp"),
    ("OpenstackProviderSpec", "openstack"),
    ("VSphereMachineProviderSpec", "vsphere"),
    ("IBMCloudMachineProviderSpec", "ibmcloud"),
    ("PowerVSMachineProviderConfig", "powervs"),
    ("NutanixMachineProviderConfig", "nutanix"),
    ("OvirtMachineProviderSpec", "ovirt"),
    ("BareMetalMachineProviderSpec", "baremetal"),
    // Cluster API infrastructure providers' machine templates.
    ("AWSMachineTemplate", "aws"),
    ("AzureMachineTemplate", "azure"),
    ("GCPMachineTemplate", "gcp"),
    ("OpenStackMachineTemplate", "openstack"),
    ("VSphereMachineTemplate", "vsphere"),
    ("IBMVPCMachineTemplate", "ibmcloud"),
    ("IBMPowerVSMachineTemplate", "powervs"),
    ("NutanixMachineTemplate", "nutanix"),
    ("DockerMachineTemplate", "docker"),
    ("KubevirtMachineTemplate", "kubevirt"),
    ("Metal3MachineTemplate", "baremetal"),
    ("HCloudMachineTemplate", "hcloud"),
    ("OCIMachineTemplate", "oci"),
    ("DOMachineTemplate", "digitalocean"),
    ("CloudStackMachineTemplate", "cloudstack"),
    ("ProxmoxMachineTemplate", "proxmox"),
    ("PacketMachineTemplate", "equinixmetal"),
];

/// The platform of a providerID's scheme (`gce://proj/zone/name` → `gcp`); none without a
/// `scheme://` or for a scheme not known.
pub fn of_provider_id(id: &str) -> Option<&'static str> {
    let (scheme, _) = id.split_once("://")?;
    SCHEMES
        .iter()
        .find(|(s, _)| s.eq_ignore_ascii_case(scheme.trim()))
        .map(|&(_, platform)| platform)
}

/// The platform of a provider spec's or infrastructure template's kind
/// (`AWSMachineProviderConfig`, `OpenStackMachineTemplate`); none for a kind not known.
pub fn of_kind(kind: &str) -> Option<&'static str> {
    KINDS
        .iter()
        .find(|(k, _)| *k == kind.trim())
        .map(|&(_, platform)| platform)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_id_schemes_name_the_platform() {
        let cases = [
            ("aws:///us-east-1a/i-0abc", Some("aws")),
            ("AWS:///us-east-1a/i-0abc", Some("aws")),
            (
                "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm",
                Some("azure"),
            ),
            ("gce://project/us-central1-a/instance", Some("gcp")),
            (
                "openstack:///6b8b4567-327b-23c6-643c-98664b8b4567",
                Some("openstack"),
            ),
            (
                "vsphere://42374de5-0000-0000-0000-000000000000",
                Some("vsphere"),
            ),
            ("ibmpowervs://region/zone/service/machine", Some("powervs")),
            ("docker:////workers-abc", Some("docker")),
            ("packet://1234", Some("equinixmetal")),
            // Odd input is no platform, never an error.
            ("i-0abc", None),
            ("://i-0abc", None),
            ("", None),
            ("kwok://node-1", None),
            ("aws:/us-east-1a/i-0abc", None),
        ];
        for (id, want) in cases {
            assert_eq!(of_provider_id(id), want, "{id}");
        }
    }

    #[test]
    fn provider_spec_and_template_kinds_name_the_platform() {
        let cases = [
            ("AWSMachineProviderConfig", Some("aws")),
            ("AzureMachineProviderSpec", Some("azure")),
            ("GCPMachineProviderSpec", Some("gcp")),
            ("OpenstackProviderSpec", Some("openstack")),
            ("VSphereMachineProviderSpec", Some("vsphere")),
            ("AWSMachineTemplate", Some("aws")),
            ("AzureMachineTemplate", Some("azure")),
            ("GCPMachineTemplate", Some("gcp")),
            ("OpenStackMachineTemplate", Some("openstack")),
            ("VSphereMachineTemplate", Some("vsphere")),
            ("DockerMachineTemplate", Some("docker")),
            ("FooMachineTemplate", None),
            ("awsmachinetemplate", None),
            ("", None),
        ];
        for (kind, want) in cases {
            assert_eq!(of_kind(kind), want, "{kind}");
        }
    }

    #[test]
    fn every_platform_a_kind_names_is_one_a_scheme_names_too() {
        // Else a group at zero and a group with nodes on the same platform would be kept
        // apart by spelling alone.
        for &(kind, platform) in KINDS {
            let known = SCHEMES.iter().any(|&(_, p)| p == platform);
            assert!(known, "{kind} → {platform}");
        }
    }
}
