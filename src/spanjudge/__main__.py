"""`python -m spanjudge`: the `spanjudge` command, as the console script runs it."""

from spanjudge.cli import console

if __name__ == "__main__":
    console()
