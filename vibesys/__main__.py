from vibesys.cli_fast import main

main()
