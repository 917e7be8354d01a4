import os


def read_lines(path):
    """Return the lines of the file at path, without trailing newlines."""
    with open(path) as handle:
        return [line.rstrip("\n") for line in handle]


def count_words(path):
    """Return the number of words in the file at path."""
    total = 0
    for line in read_lines(path):
        


if __name__ == "__main__":
    print(count_words(__file__))
