//! Recovery's settings.

/// A setting that is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `max_bodies` was 0: every call may start at least one body.
    #[error(
        "max_bodies must be at least 1 (got {got}): a call must be able to start its first body"
    )]
    MaxBodiesZero {
        /// The value given.
        got: u32,
    },
}

impl stepjournal_codec::Coded for ConfigError {
    fn code(&self) -> stepjournal_codec::ErrorCode {
        match self {
            ConfigError::MaxBodiesZero { .. } => stepjournal_codec::ErrorCode::InvalidOptions,
        }
    }
}

/// Recovery's settings, validated when made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    max_bodies: u32,
}

impl Config {
    /// The default `max_bodies`: 3.
    pub const DEFAULT_MAX_BODIES: u32 = 3;

    /// Settings with `max_bodies`: how many bodies one call may start in all, counting every
    /// attempt ever started. At least 1.
    pub fn new(max_bodies: u32) -> Result<Self, ConfigError> {
        if max_bodies == 0 {
            return Err(ConfigError::MaxBodiesZero { got: max_bodies });
        }
        Ok(Config { max_bodies })
    }

    /// How many bodies one call may start in all.
    pub fn max_bodies(&self) -> u32 {
        self.max_bodies
    }
}

impl Default for Config {
    /// `max_bodies` 3.
    fn default() -> Self {
        Config { max_bodies: Self::DEFAULT_MAX_BODIES }
    }
}
