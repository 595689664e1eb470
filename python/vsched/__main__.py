from vsched.cli import main

main()
