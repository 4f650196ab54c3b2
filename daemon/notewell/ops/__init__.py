"""Running notewell on a machine: the login agent, setup, doctor and the demo.

Owns ``agent`` (launchd / systemd), ``setup`` (find notes, write config, install),
``doctor`` (check each link of the chain) and ``demo`` (the bundled demo, end to end).
May import anything in notewell but ``cli``.
"""
