import sys

try:
    from trainer.cli import main
except KeyboardInterrupt:  # Ctrl-C while the trainer's modules load: as at any later moment of the start
    import os

    from trainer.exit_codes import INTERRUPTED

    print("interrupted", file=sys.stderr, flush=True)
    # Not sys.exit: an interrupt caught while a module was being imported still ended the process
    # with SIGINT's own status at times (CPython remembers it); nothing else is running yet.
    os._exit(INTERRUPTED)

sys.exit(main())
