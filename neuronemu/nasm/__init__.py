"""The text form of a program (`.nasm`): `write` prints it, `read` parses it back."""
