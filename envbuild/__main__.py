from envbuild.cli import run

run()
