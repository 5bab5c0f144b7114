//! Kubernetes Events with upstream's reasons, deduplicated and rate-limited. (To be built.)
