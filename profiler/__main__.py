from profiler.main import main

main()
