//! Modes and policies by name: one table per enum.
//!
//! A mode or policy is named in scenario files (`virt.mode = "multiqueue"`), on the command
//! line, in reports and in the configuration hash. [`named!`] declares such an enum from one
//! table of `Variant = "name"` pairs and derives everything else from it: `ALL`, `NAMES`,
//! `name()`, `from_name()`, `Display`, and serde both ways (a string; an unknown name is the
//! error `unknown <noun> 'x': expected one of a, b, c`, which the scenario loader puts after the
//! key and its line).
//!
//! Worked example:
//! ```
//! flashmux::names::named! {
//!     /// How a completion reaches the guest.
//!     pub enum Delivery: "value" {
//!         /// Interrupt injection.
//!         Inject = "inject",
//!         Exitless = "exitless",
//!     }
//! }
//! assert_eq!(Delivery::from_name("exitless"), Some(Delivery::Exitless));
//! assert_eq!(Delivery::Inject.to_string(), "inject");
//! assert_eq!(Delivery::NAMES, ["inject", "exitless"]);
//! assert_eq!(Delivery::unknown("eli"), "unknown value 'eli': expected one of inject, exitless");
//! ```

/// Declares a fieldless enum named by one table; see the [module](self) documentation.
/// The enum derives `Clone, Copy, Debug, PartialEq, Eq`; give any other derive (and `#[default]`
/// on a variant) as usual.
#[macro_export]
macro_rules! named {
    (
        $(#[$meta:meta])*
        $vis:vis enum $T:ident : $noun:literal {
            $( $(#[$vmeta:meta])* $V:ident = $name:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $T {
            $( $(#[$vmeta])* $V ),+
        }

        // A private enum need not use every direction.
        #[allow(dead_code)]
        impl $T {
            /// Every variant, in the table's order.
            pub const ALL: &'static [$T] = &[$($T::$V),+];
            /// Every name, in the table's order.
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            /// Its name in scenario files and reports.
            pub fn name(self) -> &'static str {
                match self {
                    $($T::$V => $name),+
                }
            }

            /// The variant named `name`.
            pub fn from_name(name: &str) -> Option<$T> {
                match name {
                    $($name => Some($T::$V),)+
                    _ => None,
                }
            }

            /// What an unknown name gets: `unknown <noun> 'x': expected one of ...`.
            pub fn unknown(name: &str) -> String {
                format!("unknown {} '{}': expected one of {}", $noun, name, Self::NAMES.join(", "))
            }
        }

        impl ::std::fmt::Display for $T {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::serde::Serialize for $T {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $T {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let name = <::std::string::String as ::serde::Deserialize>::deserialize(d)?;
                $T::from_name(&name).ok_or_else(|| <D::Error as ::serde::de::Error>::custom($T::unknown(&name)))
            }
        }
    };
}

pub use named;

#[cfg(test)]
mod tests {
    named! {
        #[derive(Default, PartialOrd, Ord)]
        enum Mode: "mode" {
            #[default]
            BareMetal = "bare-metal",
            Vm = "vm",
        }
    }

    #[test]
    fn one_table_gives_every_direction() {
        assert_eq!(Mode::ALL, [Mode::BareMetal, Mode::Vm]);
        for &m in Mode::ALL {
            assert_eq!(Mode::from_name(m.name()), Some(m));
            assert_eq!(m.to_string(), m.name());
        }
        assert_eq!(Mode::from_name("Vm"), None, "names are exact");
        assert_eq!(Mode::default(), Mode::BareMetal);
    }

    #[test]
    fn serde_reads_and_writes_the_name() {
        assert_eq!(serde_json::to_string(&Mode::BareMetal).unwrap(), "\"bare-metal\"");
        #[derive(serde::Deserialize)]
        struct S {
            mode: Mode,
        }
        assert_eq!(toml::from_str::<S>("mode = \"vm\"").unwrap().mode, Mode::Vm);
        let e = toml::from_str::<S>("mode = \"kvm\"").err().unwrap();
        assert_eq!(e.message(), "unknown mode 'kvm': expected one of bare-metal, vm");
        assert!(toml::from_str::<S>("mode = 1").is_err());
    }
}
