package pg

import "github.com/agentgw/agentgw/store"

// Drivers returns every feature's driver on db.
func (db *DB) Drivers() store.Drivers {
	return store.Drivers{
		Tasks: NewTasks(db), Directory: NewDirectory(db), Grants: NewGrants(db),
		Bindings: NewBindings(db), Chats: NewChats(db), ACC: NewACC(db),
		OAN: NewOAN(db), SelfReg: NewSelfReg(db), Presence: NewPresence(db),
		ConsoleSessions: NewConsoleSessions(db),
	}
}
