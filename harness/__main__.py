from harness.commands.cli import main

if __name__ == "__main__":   # guarded: the worker process (spawn) re-imports __main__
    main()
