//! The `cluster-autoscaler-status` ConfigMap in upstream's 1.30+ YAML layout. (To be built.)
