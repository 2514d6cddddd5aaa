// api-whoami: the real node's test agent (images.sh puts it in the busybox image). Standard library only.
module sidecar-injector.test/cluster/world/real-node/api-whoami

go 1.26.0
