"""Conway's Game of Life on a torus using np.roll neighbour sums."""


def step(np, grid):
    n = np.zeros(grid.shape, dtype=np.int64)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            if dy == 0 and dx == 0:
                continue
            n += np.roll(np.roll(grid, dy, axis=0), dx, axis=1)
    alive = grid.astype(bool)
    new = (n == 3) | (alive & (n == 2))
    return new.astype(np.uint8)


def run(np):
    np.random.seed(2)
    grid = (np.random.rand(40, 50) < 0.3).astype(np.uint8)
    # add a glider in an empty corner
    grid[:6, :6] = 0
    grid[1, 2] = grid[2, 3] = 1
    grid[3, 1:4] = 1

    population = [int(grid.sum())]
    for gen in range(60):
        grid = step(np, grid)
        population.append(int(grid.sum()))

    still = np.array_equal(step(np, grid), grid)
    rows_alive = np.any(grid.astype(bool), axis=1)
    return {
        "grid": grid,
        "population": np.array(population),
        "final_population": population[-1],
        "still_life": bool(still),
        "rows_alive": rows_alive,
        "density_by_col": grid.mean(axis=0),
        "alive_coords": np.argwhere(grid == 1),
    }
