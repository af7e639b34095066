-- A job's project belongs to the job's team, said by the database.
--
-- Forward-only, as every migration here.

-- One foreign key on (project_id, team_id) instead of one on each: it
-- refuses a job whose project is another team's (which two separate keys
-- allowed), and the team's existence follows from the project's own key.
ALTER TABLE projects ADD CONSTRAINT projects_id_team UNIQUE (id, team_id);
ALTER TABLE jobs
    DROP CONSTRAINT jobs_project_id_fkey,
    DROP CONSTRAINT jobs_team_id_fkey,
    ADD CONSTRAINT jobs_project_in_team FOREIGN KEY (project_id, team_id)
        REFERENCES projects (id, team_id);
