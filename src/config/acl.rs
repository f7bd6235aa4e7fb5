//! Where ACL users come from (docs/security.md, "Where users are kept"):
//! `aclfile`, `acl-pubsub-default`, and the `user` lines of the
//! configuration file, checked when read and applied by the engine at
//! startup.

use super::params::{Kind, Param, IMMUTABLE};

/// The ACL settings (a field of [`Config`](super::Config)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclSettings {
    /// `aclfile`: the ACL file (empty: none); relative paths are inside
    /// `dir`.
    pub aclfile: String,
    /// `acl-pubsub-default allchannels` (true) or `resetchannels`.
    pub pubsub_all: bool,
    /// The `user` lines, in order: the name, then its rules (selectors
    /// written over several words already joined).
    pub users: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
}

/// A `user <name> <rules>…` line (`args` without the word `user`): a
/// second line for one name is refused as Redis refuses it; the rules are
/// checked by `catalog` (the configuration sits below ACLs,
/// ARCHITECTURE.md "Layers").
pub(super) fn add_user(
    settings: &mut AclSettings,
    args: &[Vec<u8>],
    catalog: &dyn super::CommandCatalog,
) -> Result<(), String> {
    let name = &args[0];
    if settings.users.iter().any(|(n, _)| n == name) {
        return Err(format!(
            "Error in user declaration '{}': Duplicate user found. A user can only be defined once in config files",
            String::from_utf8_lossy(name)
        ));
    }
    let rules = catalog.check_user(name, &args[1..])?;
    settings.users.push((name.clone(), rules));
    Ok(())
}

/// `aclfile`.
pub(super) const ACLFILE: Param = Param {
    name: "aclfile",
    alias: None,
    flags: IMMUTABLE,
    default: "",
    kind: Kind::Str {
        get: |c| c.acl.aclfile.clone().into_bytes(),
        set: |c, v| {
            c.acl.aclfile = String::from_utf8_lossy(v).into_owned();
            Ok(())
        },
    },
    unsupported: None,
};

/// `acl-pubsub-default`.
pub(super) const ACL_PUBSUB_DEFAULT: Param = Param {
    name: "acl-pubsub-default",
    alias: None,
    flags: 0,
    default: "resetchannels",
    kind: Kind::Enum {
        values: &["allchannels", "resetchannels"],
        get: |c| usize::from(!c.acl.pubsub_all),
        set: |c, i| c.acl.pubsub_all = i == 0,
    },
    unsupported: None,
};
