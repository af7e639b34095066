package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Team is a stored team. Quantities are GPU milli.
type Team struct {
	Name           string
	GuaranteeMilli int64
	BurstMilli     int64
	Weight         float64
	Classes        []string
}

// User is a stored user; Team is empty for an admin.
type User struct {
	Name      string
	Role      string
	Team      string
	CreatedAt time.Time
}

// Token is a stored token, without its secret.
type Token struct {
	ID          string
	User        string
	Description string
	CreatedAt   time.Time
	RevokedAt   time.Time // zero while valid
}

// Principal is who a valid token speaks for.
type Principal struct {
	User    string
	Role    string
	Team    string
	TokenID string
}

// Project is a stored project.
type Project struct {
	Team, Name string
	CreatedAt  time.Time
}

// HashToken is how secrets are stored: SHA-256. Tokens are 32 random
// bytes, so a fast hash is enough; there is nothing to guess.
func HashToken(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// PutTeam creates a team or replaces its quota.
func (s *Store) PutTeam(ctx context.Context, t Team, create bool) error {
	return s.Do(ctx, func(tx *sql.Tx) error {
		classes := strings.Join(t.Classes, ",")
		if create {
			_, err := tx.Exec(`INSERT INTO teams (name, guarantee_milli, burst_milli, weight, classes, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
				t.Name, t.GuaranteeMilli, t.BurstMilli, t.Weight, classes, time.Now().UnixNano())
			if err != nil && strings.Contains(err.Error(), "UNIQUE") {
				return fmt.Errorf("team %q: %w: it exists", t.Name, ErrConflict)
			}
			if err != nil {
				return err
			}
			_, err = tx.Exec(`INSERT INTO projects (team, name, created_at) VALUES (?, 'default', ?)`, t.Name, time.Now().UnixNano())
			return err
		}
		res, err := tx.Exec(`UPDATE teams SET guarantee_milli = ?, burst_milli = ?, weight = ?, classes = ? WHERE name = ?`,
			t.GuaranteeMilli, t.BurstMilli, t.Weight, classes, t.Name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("team %q: %w", t.Name, ErrNotFound)
		}
		return nil
	})
}

// Teams lists the teams by name.
func (s *Store) Teams(ctx context.Context) ([]Team, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name, guarantee_milli, burst_milli, weight, classes FROM teams ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Team
	for rows.Next() {
		var t Team
		var classes string
		if err := rows.Scan(&t.Name, &t.GuaranteeMilli, &t.BurstMilli, &t.Weight, &classes); err != nil {
			return nil, err
		}
		t.Classes = strings.Split(classes, ",")
		out = append(out, t)
	}
	return out, rows.Err()
}

// AddProject creates a project of a team.
func (s *Store) AddProject(ctx context.Context, team, name string) error {
	return s.Do(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM teams WHERE name = ?`, team).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("team %q: %w", team, ErrNotFound)
		}
		_, err := tx.Exec(`INSERT INTO projects (team, name, created_at) VALUES (?, ?, ?)`, team, name, time.Now().UnixNano())
		if err != nil && strings.Contains(err.Error(), "UNIQUE") {
			return fmt.Errorf("project %q of team %q: %w: it exists", name, team, ErrConflict)
		}
		return err
	})
}

// Projects lists the projects, of one team when team is not empty.
func (s *Store) Projects(ctx context.Context, team string) ([]Project, error) {
	q, args := `SELECT team, name, created_at FROM projects`, []any{}
	if team != "" {
		q, args = q+` WHERE team = ?`, append(args, team)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY team, name`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Project
	for rows.Next() {
		var p Project
		var at int64
		if err := rows.Scan(&p.Team, &p.Name, &at); err != nil {
			return nil, err
		}
		p.CreatedAt = time.Unix(0, at).UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}

// AddUser creates a user.
func (s *Store) AddUser(ctx context.Context, u User) error {
	return s.Do(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO users (name, role, team, created_at) VALUES (?, ?, ?, ?)`, u.Name, u.Role, nullable(u.Team), u.CreatedAt.UnixNano())
		if err != nil && strings.Contains(err.Error(), "UNIQUE") {
			return fmt.Errorf("user %q: %w: it exists", u.Name, ErrConflict)
		}
		return err
	})
}

// Users lists the users by name.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name, role, coalesce(team, ''), created_at FROM users ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []User
	for rows.Next() {
		var u User
		var at int64
		if err := rows.Scan(&u.Name, &u.Role, &u.Team, &at); err != nil {
			return nil, err
		}
		u.CreatedAt = time.Unix(0, at).UTC()
		out = append(out, u)
	}
	return out, rows.Err()
}

// AddToken stores a token's hash for a user.
func (s *Store) AddToken(ctx context.Context, t Token, secret string) error {
	return s.Do(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM users WHERE name = ?`, t.User).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("user %q: %w", t.User, ErrNotFound)
		}
		_, err := tx.Exec(`INSERT INTO tokens (id, user, hash, description, created_at) VALUES (?, ?, ?, ?, ?)`,
			t.ID, t.User, HashToken(secret), t.Description, t.CreatedAt.UnixNano())
		return err
	})
}

// RevokeToken revokes a token; revoking twice is not an error.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) error {
	return s.Do(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(`UPDATE tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`, at.UnixNano(), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("token %q: %w", id, ErrNotFound)
		}
		return nil
	})
}

// Tokens lists the tokens, newest first.
func (s *Store) Tokens(ctx context.Context) ([]Token, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, user, description, created_at, coalesce(revoked_at, 0) FROM tokens ORDER BY created_at DESC`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var at, rev int64
		if err := rows.Scan(&t.ID, &t.User, &t.Description, &at, &rev); err != nil {
			return nil, err
		}
		t.CreatedAt = time.Unix(0, at).UTC()
		if rev != 0 {
			t.RevokedAt = time.Unix(0, rev).UTC()
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Authenticate finds the principal of a secret, or ErrNotFound for an
// unknown or revoked token.
func (s *Store) Authenticate(ctx context.Context, secret string) (Principal, error) {
	var p Principal
	err := s.r.QueryRowContext(ctx, `SELECT t.id, u.name, u.role, coalesce(u.team, '')
		FROM tokens t JOIN users u ON u.name = t.user WHERE t.hash = ? AND t.revoked_at IS NULL`, HashToken(secret)).
		Scan(&p.TokenID, &p.User, &p.Role, &p.Team)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	return p, err
}

// CountUsers counts users; 0 means a new database.
func (s *Store) CountUsers(ctx context.Context) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM users`).Scan(&n)
	return n, err
}
