"""The OS sandbox a sealed command runs in (`flightlog run --sealed`): bubblewrap and a seccomp filter.

- `filesystem`: what the command sees of the files (the policy that fits on one screen) as bwrap's
  mount arguments;
- `policy_table`: that policy's `[sandbox]` table in the egress policy file;
- `syscalls`: the seccomp filter, for what the namespaces do not cover;
- `bwrap`: the namespaces, the user the command runs as, and bwrap's command line.

`flightlog.sealed` puts them together with the network path (a TUN device, or the proxy's ports).
"""
