"""What every long-running service process shares: node identity and the
data-directory lock (``servicekit.node``), listening sockets and the status
address rule (``servicekit.net``), the grpclib server every gRPC port runs
(``servicekit.grpcserver``), and the signal-driven main (``servicekit.main``).
Services never import each other; they share this.
"""
