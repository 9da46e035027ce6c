# Loopback ports for targets/advisories/run.sh, which sources this file.

# free_port: a port the kernel has just given out on 127.0.0.1.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port PORT: until it accepts a connection, 30 s at most.
wait_port() {
  for _ in $(seq 300); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
