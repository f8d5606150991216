"""Problems spread over processes and machines: one executor per Ray actor, results back to the driver.

    ExecutorSpec      the recipe an actor builds its models and executor from (spec.py)
    SearchWork        what an actor does with each problem (work.py)
    solve_on_ray      run problems on a pool of Ray actors, yield Finished / Failed (ray_pool.py)

Ray is an optional extra (`pip install "seed-tot[ray]"`) and is imported only by ray_pool.py.
"""
