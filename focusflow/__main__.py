"""``python -m focusflow``: the CLI where its console script is not installed (a source checkout on a GPU worker,
``torchrun -m focusflow lapt …``)."""

from focusflow.cli import main

if __name__ == "__main__":
    main()
