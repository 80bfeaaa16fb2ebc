module jax-training/cluster/pause

go 1.26.0
